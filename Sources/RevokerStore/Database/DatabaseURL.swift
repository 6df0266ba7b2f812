import Foundation
import PostgresNIO

/// What a `postgres://` URL names, read once for the client pool and for a single probe
/// connection (which reports what the server said when the pool would only wait).
public struct DatabaseEndpoint: Sendable {
    public let host: String
    public let port: Int
    public let username: String
    let password: String?
    public let database: String?
    let tls: TLSChoice
    let applicationName: String?

    enum TLSChoice {
        case disable
        case prefer(TLSConfiguration)
        case require(TLSConfiguration)
    }

    /// Reads a `postgres://` (or `postgresql://`) URL such as
    /// `postgres://user:password@host:5432/database?sslmode=require`.
    ///
    /// Supported query parameters: `sslmode` (`disable`, `prefer` (default), `require`,
    /// `verify-full`) and `application_name`. Percent-encoded user names and passwords are
    /// decoded. Errors never contain the password.
    public init(url string: String) throws(RevokerStoreError) {
        func fail(_ reason: String) -> RevokerStoreError {
            RevokerStoreError(.invalidDatabaseURL, "invalid database URL: \(reason)")
        }
        guard let components = URLComponents(string: string) else {
            throw fail("not a URL (expected postgres://user:password@host:port/database)")
        }
        guard let scheme = components.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
            throw fail("the scheme must be postgres:// or postgresql://")
        }
        guard let host = components.host, !host.isEmpty else {
            throw fail("missing host")
        }
        guard let username = components.user?.removingPercentEncoding, !username.isEmpty else {
            throw fail("missing user name")
        }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else {
            throw fail("port out of range")
        }
        var path = components.path
        if path.hasPrefix("/") { path.removeFirst() }

        var tls = TLSChoice.prefer(.makeClientConfiguration())
        var applicationName: String?
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                switch item.value ?? "" {
                case "disable": tls = .disable
                case "allow", "prefer": tls = .prefer(.makeClientConfiguration())
                case "require":
                    var configuration = TLSConfiguration.makeClientConfiguration()
                    configuration.certificateVerification = .none
                    tls = .require(configuration)
                case "verify-ca", "verify-full": tls = .require(.makeClientConfiguration())
                default: throw fail("unsupported sslmode (use disable, prefer, require or verify-full)")
                }
            case "application_name":
                applicationName = item.value
            default:
                throw fail("unsupported query parameter '\(item.name)'")
            }
        }
        self.host = host
        self.port = port
        self.username = username
        self.password = components.password?.removingPercentEncoding
        self.database = path.removingPercentEncoding.flatMap { $0.isEmpty ? nil : $0 }
        self.tls = tls
        self.applicationName = applicationName
    }

    /// Settings for a client pool.
    public var clientConfiguration: PostgresClient.Configuration {
        let clientTLS: PostgresClient.Configuration.TLS =
            switch tls {
            case .disable: .disable
            case .prefer(let configuration): .prefer(configuration)
            case .require(let configuration): .require(configuration)
            }
        var configuration = PostgresClient.Configuration(
            host: host,
            port: port,
            username: username,
            password: password,
            database: database,
            tls: clientTLS
        )
        if let applicationName { configuration.options.additionalStartupParameters.append(("application_name", applicationName)) }
        return configuration
    }

    /// Settings for one connection.
    public func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let connectionTLS: PostgresConnection.Configuration.TLS =
            switch tls {
            case .disable: .disable
            case .prefer(let configuration): .prefer(try NIOSSLContext(configuration: configuration))
            case .require(let configuration): .require(try NIOSSLContext(configuration: configuration))
            }
        var configuration = PostgresConnection.Configuration(
            host: host,
            port: port,
            username: username,
            password: password,
            database: database,
            tls: connectionTLS
        )
        if let applicationName { configuration.options.additionalStartupParameters.append(("application_name", applicationName)) }
        return configuration
    }
}

extension PostgresClient.Configuration {
    /// A client configuration from a `postgres://` URL; see ``DatabaseEndpoint/init(url:)``.
    public init(url string: String) throws(RevokerStoreError) {
        self = try DatabaseEndpoint(url: string).clientConfiguration
    }
}
