"""kbgate: a knowledge gateway between agent platforms and a company's own knowledge."""

__version__ = "0.1.0"
