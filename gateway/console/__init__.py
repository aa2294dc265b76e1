"""The browser console under `/admin/`: one room (docs/architecture.md, "The console").

render       templates, the one navigation, gate (who may), CSRF-checked forms, POST-redirect-GET
users        console users and roles; `can(user, action, index)`, the one authorisation rule
session      who is asking (Bearer or login cookie); login, logout in `login`
overview     /admin/: every route at a glance           deliveries_view  /admin/deliveries
try_page     /admin/try                                 gaps             /admin/gaps, /admin/documents
browse       /admin/indexes: documents, chunks          doc_writes       upload, edit, delete, disable
links        document_url(index, doc_id, chunk)         placeholders     navigation entries not built yet
routes       every console route, for the app

Kept light: `kbgate try` imports gateway.console.try_ without the pages.
"""
