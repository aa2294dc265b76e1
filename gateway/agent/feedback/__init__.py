"""FeedbackBridge and its IssueTracker adapters (seed 002 §6, §9.5, §9.6, §11).

`tracker.py` holds the adapter interface and the shapes; `bridge.py` turns a
FeedbackRequest / ImprovementTaskRequest into an issue draft and runs it through the
idempotency/dedupe store; `sqlite.py` is the embedded default tracker (works with no
GitHub); `github.py` is the GitHub Issues adapter over httpx. A tracker's private fields
(issue number, URL, repository, labels) stay inside `TrackedIssue.private` and never
reach the public WriteResult.
"""

from gateway.agent.feedback.bridge import FeedbackBridge, Submitted
from gateway.agent.feedback.tracker import IssueDraft, IssueTracker, TrackedIssue, record_id

__all__ = ["FeedbackBridge", "IssueDraft", "IssueTracker", "Submitted", "TrackedIssue", "record_id"]
