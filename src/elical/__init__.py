"""elical: honesty alignment for language models (EliCal, Ni et al., arXiv 2510.17509)."""

__version__ = "0.1.0"
