"""Sans-IO codecs, one per wire protocol: bytes <-> messages, no I/O."""
