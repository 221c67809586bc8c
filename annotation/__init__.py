"""The annotation store: the database and everything about people.

Modules
-------
db          `open_db(path)`, `ensure_schema(db)`, `transaction(db)`, `iso()`/`utcnow()`
schema      the tables as ordered forward migrations; status vocabularies
concepts    `sync_concepts(db)`, `get_concept(db, key)`
files       content-hash image storage (`store_bytes`, `store_png`), `resolve`, `decode_image`
accounts    annotators, invites, sessions; `require(db, session_token, *roles) -> Actor`
passwords   the admin password (`ensure_admin_password`, `login_admin`, `set_admin_password`)
onboarding  consent, instructions, practice approval; `onboarding_stage(db, annotator_id)`
assignment  `reserve`, `reserve_practice`, `submit`, `release`, `expire`, `open_tasks`
overview    `coverage(db, k)` for the admin page
audit       `record(db, actor, action, object_type, object_id, why)`
export      `export(db, data_dir, folder)`, `export_archive(db, data_dir, zip_path)`
errors      `AnnotationError` and its subclasses

Command line: ``python -m annotation export DIR`` and ``python -m annotation
set-admin-password``.
"""
