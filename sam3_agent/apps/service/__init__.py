"""SAM 3 as an HTTP service, so one GPU machine can segment for many agents.

Start it with ``sam3-agent serve-sam3`` (``--video`` to track videos too); agents reach it
through :class:`sam3_agent.backends.sam3_remote.RemoteSegmenter` and
:class:`sam3_agent.backends.sam3_remote_video.RemoteVideoSegmenter`. The wire format is in
:mod:`sam3_agent.backends.schemas` and :mod:`sam3_agent.backends.wire`, the app in
:mod:`sam3_agent.apps.service.app` (the video endpoints in
:mod:`sam3_agent.apps.service.videos`), the server in :mod:`sam3_agent.apps.service.server`.
The web stack is imported only when the app is built, so the CLI's ``--help`` does not pay
for it.
"""
