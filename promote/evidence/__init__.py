"""The evidence: gates, run history and deltas, the pages (Markdown, HTML, JSON, in-toto), publishing, the audit."""
