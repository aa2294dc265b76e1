"""`kbgate sync`: keep indexes current from where their documents live (issue 20 item 3).

Sources are declared per index (`[[indexes.NAME.sources]]`, gateway/core/config/sync.py):
a Git repository (git.py), a website by sitemap or bounded crawl (web.py over fetch.py), a
folder (folder.py). Each computes a `Plan` against its recorded state (plan.py); run.py applies
every plan of an index in one commit through `indexes.changes.apply_changes` (apply.py: one
change set per index) and then records the new state. docs/indexes.md, "Keeping an index
current", is the operator's guide.
"""
