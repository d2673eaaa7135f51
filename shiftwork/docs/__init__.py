"""Documentation tooling: the configuration reference generated from the schema, and the lint of
the Markdown pages (``make docs-config``, ``make lint``)."""
