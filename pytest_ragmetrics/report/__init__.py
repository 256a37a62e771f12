"""The verdict as people read it: terminal text, Markdown, HTML and shared tables."""
