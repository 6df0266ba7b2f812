// The seam Apple implements, and the support it shares with other providers.
@_exported import RevokerProvider
