"""``sam3-agent inspect``: a session round by round, read back by :func:`.model.load_run`, in
the terminal (:mod:`.terminal`) or as HTML (:mod:`.html_page`), each renderer imported only by
who needs it."""
