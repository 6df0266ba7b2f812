@_exported import RevokerProvider
