import Foundation
import RevokerProvider

/// One Facebook app as Revoker uses it: the app id that scopes its users' ids, and the app
/// secret that signs its callbacks' `signed_request`s and makes its app access token.
public struct FacebookApp: Sendable, CustomStringConvertible {
    /// The app id (digits), as requests name the app in `client_id`.
    public let appID: String
    /// The app secret.
    public let secret: FacebookAppSecret

    /// Checks the app id's shape.
    public init(appID: String, secret: FacebookAppSecret) throws {
        guard Self.isAppID(appID) else {
            throw FacebookLoginError(.invalidAppID, "'\(appID.prefix(100))' is not a Facebook app id (1 to 32 digits).")
        }
        self.appID = appID
        self.secret = secret
    }

    /// Facebook's app ids are decimal numbers (15 or 16 digits today).
    public static func isAppID(_ value: String) -> Bool {
        (1...32).contains(value.utf8.count) && value.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    /// The app access token (`app_id|app_secret`): what Graph API calls about the app's users carry.
    var accessToken: String { appID + "|" + secret.value }

    public var description: String { "FacebookApp(app_id: \(appID), secret: redacted)" }
}

/// A Facebook app secret. Its descriptions never show the value.
public struct FacebookAppSecret: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The value, for an HMAC or the app access token.
    public let value: String

    /// Checks that the value is usable: 1 to 256 printable ASCII characters without whitespace
    /// (the App Dashboard shows 32 hexadecimal digits).
    public init(_ value: String) throws {
        guard (1...256).contains(value.utf8.count), value.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }),
            !value.contains("|")
        else {
            throw FacebookLoginError(
                .invalidAppSecret,
                "The app secret is empty, too long, or holds whitespace or characters Facebook's secrets do not have."
            )
        }
        self.value = value
    }

    /// Reads the secret alone from a file (surrounding whitespace ignored).
    public static func load(contentsOfFile path: String) throws -> FacebookAppSecret {
        guard FileManager.default.fileExists(atPath: path) else {
            throw FacebookLoginError(.appSecretFileNotFound, "The app secret file \(path) does not exist.")
        }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw FacebookLoginError(.appSecretFileUnreadable, "The app secret file \(path) cannot be read as UTF-8 text.")
        }
        do {
            return try FacebookAppSecret(text.trimmingCharacters(in: .whitespacesAndNewlines))
        } catch let error as FacebookLoginError {
            throw FacebookLoginError(error.code, "\(error.message) (\(path))")
        }
    }

    public var description: String { "FacebookAppSecret(redacted)" }
    public var debugDescription: String { description }
}

extension ProviderName {
    /// Facebook Login.
    public static let facebook = ProviderName(rawValue: "facebook")!
}
