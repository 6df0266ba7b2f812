import Crypto
import Foundation

/// What kind of credential a request holds.
public struct CredentialKind: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init?(rawValue: String) {
        guard Self.all.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }
    private init(_ rawValue: String) { self.rawValue = rawValue }

    /// A single-use authorization code (Apple's is valid for five minutes).
    public static let authorizationCode = Self("authorization_code")
    /// A refresh token.
    public static let refreshToken = Self("refresh_token")
    /// An access token.
    public static let accessToken = Self("access_token")
    /// All kinds.
    public static let all: [CredentialKind] = [.authorizationCode, .refreshToken, .accessToken]

    public var description: String { self.rawValue }
}
