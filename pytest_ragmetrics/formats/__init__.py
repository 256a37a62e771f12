"""The files the tool reads and writes, one module a format: its typed records, reader and writer.

Each module parses and checks a file once, at the edge, and hands on typed records; nothing past
these modules indexes a raw dict read from disk.
"""
