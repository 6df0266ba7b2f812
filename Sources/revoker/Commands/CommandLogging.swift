import Logging

/// Logging for the command line: one bootstrap, to standard error, at the chosen level.
enum CommandLogging {
    static func logger(label: String, level: Logger.Level) -> Logger {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        return Logger(label: label)
    }
}
