"""The HTML report of a scored batch: inline SVG charts, no external resources."""

from adapters.report.html import DEFAULT_MAX_DEBATES, render_html, svg_histogram

__all__ = ["DEFAULT_MAX_DEBATES", "render_html", "svg_histogram"]
