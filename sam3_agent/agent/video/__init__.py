"""The video medium: segment and track what a sentence describes through a clip.

:class:`~sam3_agent.agent.video.agent.Sam3VideoAgent` (the one agent loop given
:class:`~sam3_agent.agent.video.agent.VideoMedium`), its scene with per-track checks that
may answer Uncertain (:mod:`.session`), the tools described for tracks (:mod:`.tools`) and
the result (:mod:`.result`).
"""
