"""The video medium: segment and track what a sentence describes through a clip."""
