"""The connector's user-facing error."""


class ConnectorError(ValueError):
    """A user-facing error of the connector (the message names the option or column involved)."""
