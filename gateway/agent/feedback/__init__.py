"""FeedbackBridge and its IssueTracker adapters (Agent Access API 技术设计 §6, §9.5, §9.6, §11).

Rationale: docs/design-notes.md, "gateway/agent/feedback/__init__.py".
"""

from gateway.agent.feedback.bridge import FeedbackBridge, Submitted
from gateway.agent.feedback.tracker import IssueDraft, IssueTracker, TrackedIssue, record_id

__all__ = ["FeedbackBridge", "IssueDraft", "IssueTracker", "Submitted", "TrackedIssue", "record_id"]
