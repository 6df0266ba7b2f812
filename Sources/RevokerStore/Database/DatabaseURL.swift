import Foundation
import PostgresNIO

extension PostgresClient.Configuration {
    /// Creates a client configuration from a `postgres://` (or `postgresql://`) URL such as
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
        let password = components.password?.removingPercentEncoding
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else {
            throw fail("port out of range")
        }
        var path = components.path
        if path.hasPrefix("/") { path.removeFirst() }
        let database = path.removingPercentEncoding.flatMap { $0.isEmpty ? nil : $0 }

        var tls: TLS = .prefer(.makeClientConfiguration())
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
        self.init(host: host, port: port, username: username, password: password, database: database, tls: tls)
        if let applicationName {
            self.options.additionalStartupParameters.append(("application_name", applicationName))
        }
    }
}
