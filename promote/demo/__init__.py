"""`promote demo`: a built-in example workspace, with planted problems, audited end to end."""
