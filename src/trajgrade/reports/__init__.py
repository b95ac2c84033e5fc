"""Graded runs written for where people read them: JUnit XML for CI, Markdown for pull requests, one HTML file.

Each takes the runs grouped by where they came from (an input file, or a run set), as ``(name, reports)``.
"""
