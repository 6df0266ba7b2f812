import Logging

/// Logging for the command line: one bootstrap, to standard error, at the chosen level.
enum CommandLogging {
    /// `metadataProvider`, when given, adds to every line (tracing's `trace_id` and `span_id`).
    static func logger(label: String, level: Logger.Level, metadataProvider: Logger.MetadataProvider? = nil) -> Logger {
        LoggingSystem.bootstrap(
            { label, provider in
                var handler = StreamLogHandler.standardError(label: label, metadataProvider: provider)
                handler.logLevel = level
                return handler
            },
            metadataProvider: metadataProvider
        )
        return Logger(label: label)
    }
}
