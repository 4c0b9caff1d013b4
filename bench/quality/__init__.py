"""Quality: long-term memory recall on LoCoMo (in process, through the service, through make run), profile facts."""
