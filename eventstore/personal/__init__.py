"""Personal data: fields marked `Personal` (`fields.py`), sealed in an envelope
(`envelope.py`) with a key per data subject (`keys.py`) as the store writes them, opened
as it reads them (`sealing.py`); `forget` deletes the key."""
