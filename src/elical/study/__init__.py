"""``elical study``: the HonestyBench protocol (Ni et al., arXiv 2510.17509, Sec. 5-6) as one resumable command.

:mod:`~elical.study.presets` (sizes), :mod:`~elical.study.protocol` (the fitting loop on a run directory),
:mod:`~elical.study.summary` (groups, intervals, headline ratios), :mod:`~elical.study.tables` (the paper's
layout), :mod:`~elical.study.command` (the command). Figures and the HTML page: :mod:`elical.study.page`.
"""

from elical.study.presets import STUDY_PRESETS, StudyPreset

__all__ = ["STUDY_PRESETS", "StudyPreset", "run_study"]


def __getattr__(name):
    if name == "run_study":
        from elical.study.command import run_study

        return run_study
    raise AttributeError(name)
