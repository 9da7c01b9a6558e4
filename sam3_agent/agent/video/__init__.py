"""The video agent: segment and track what a sentence describes through a clip.

:class:`~sam3_agent.agent.video.agent.Sam3VideoAgent` (the loop), its session
(:mod:`.session`), tools (:mod:`.tools`), per-track checks with an Uncertain verdict
(:mod:`.checks`), result (:mod:`.result`) and run-directory files (:mod:`.outputs`).
"""
