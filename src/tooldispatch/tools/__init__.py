"""Tools that ship with tooldispatch.

- :mod:`tooldispatch.tools.demo`: the intra-city logistics world (drivers, orders, a message outbox),
  whose state lives in SQLite so that side effects can be counted exactly.
- :mod:`tooldispatch.tools.sandbox`: ``read_file`` / ``list_dir`` confined to one workspace folder.
- :mod:`tooldispatch.tools.web`: ``fetch_url`` that refuses private, loopback and link-local addresses.
"""
