"""Model engines behind one seam (``Backend.stream``); see ``base``."""
