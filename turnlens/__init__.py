"""turnlens: when a user pressed stop, what had already happened in the world, and do all layers agree?"""

__version__ = "0.1.0"
