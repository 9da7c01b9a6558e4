"""Pictures and clips: drawing masks, rendering what the model is shown, decoding and
writing video. Above :mod:`sam3_agent.values` (it draws those values), below the backends."""
