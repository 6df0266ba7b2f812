import Foundation

/// One Google OAuth client as Revoker uses it: the client_id and secret that refresh and
/// exchange its grants, and every client ID of the app whose identity tokens name its users.
public struct GoogleApp: Sendable, CustomStringConvertible {
    /// The OAuth client that holds the grants (usually the app's web or server client).
    public let clientID: String
    /// That client's secret.
    public let clientSecret: GoogleClientSecret
    /// The client IDs an identity token may be issued to: `clientID`, then the app's iOS,
    /// Android and other clients.
    public let audiences: [String]
    /// The `redirect_uri` sent with a code that was enqueued without one.
    public let defaultRedirectURI: String?

    /// Checks the client IDs' shape; `audiences` gets `clientID` first when it lacks it.
    public init(clientID: String, clientSecret: GoogleClientSecret, audiences: [String] = [], defaultRedirectURI: String? = nil) throws {
        for id in [clientID] + audiences {
            guard Self.isClientID(id) else {
                throw GoogleSignInError(
                    .invalidClientID,
                    "'\(id.prefix(100))' is not a Google OAuth client ID (it ends in .apps.googleusercontent.com)."
                )
            }
        }
        self.clientID = clientID
        self.clientSecret = clientSecret
        var all = [clientID]
        for audience in audiences where !all.contains(audience) { all.append(audience) }
        self.audiences = all
        self.defaultRedirectURI = defaultRedirectURI
    }

    /// Google's OAuth client IDs look like `1234-abc.apps.googleusercontent.com`.
    public static func isClientID(_ value: String) -> Bool {
        let suffix = ".apps.googleusercontent.com"
        guard value.hasSuffix(suffix), value.utf8.count <= 256 else { return false }
        let head = value.dropLast(suffix.count)
        return !head.isEmpty
            && head.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: ".")
            }
    }

    public var description: String { "GoogleApp(client_id: \(clientID), client_secret: redacted, audiences: \(audiences))" }
}

/// A Google OAuth client secret. Its descriptions never show the value.
public struct GoogleClientSecret: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The value, for the form body of a call.
    public let value: String

    /// Checks that the value is usable: not empty, no whitespace or control characters.
    public init(_ value: String) throws {
        guard !value.isEmpty, value.utf8.count <= 1024, value.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw GoogleSignInError(
                .invalidClientSecret,
                "The client secret is empty or holds whitespace or other characters Google's secrets do not have."
            )
        }
        self.value = value
    }

    /// Reads a secret from a file: either the secret alone (surrounding whitespace ignored) or
    /// the client's JSON as Google Cloud Console downloads it (`{"web": {"client_id": …,
    /// "client_secret": …}}`, or `"installed"`), whose client_id must then be `clientID`.
    public static func load(contentsOfFile path: String, clientID: String) throws -> GoogleClientSecret {
        guard FileManager.default.fileExists(atPath: path) else {
            throw GoogleSignInError(.clientSecretFileNotFound, "The client secret file \(path) does not exist.")
        }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw GoogleSignInError(.clientSecretFileUnreadable, "The client secret file \(path) cannot be read as UTF-8 text.")
        }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix("{") else {
            do {
                return try GoogleClientSecret(trimmed)
            } catch let error as GoogleSignInError {
                throw GoogleSignInError(error.code, "The client secret file \(path): \(error.message)")
            }
        }
        struct Download: Decodable {
            struct Client: Decodable {
                var client_id: String?
                var client_secret: String?
            }
            var web: Client?
            var installed: Client?
        }
        guard let download = try? JSONDecoder().decode(Download.self, from: Data(trimmed.utf8)), let client = download.web ?? download.installed,
            let secret = client.client_secret
        else {
            throw GoogleSignInError(
                .invalidClientSecret,
                "The client secret file \(path) is JSON but not a Google client download (no web.client_secret or installed.client_secret)."
            )
        }
        guard client.client_id == nil || client.client_id == clientID else {
            throw GoogleSignInError(.invalidClientSecret, "The client secret file \(path) is for another client_id than \(clientID).")
        }
        do {
            return try GoogleClientSecret(secret)
        } catch let error as GoogleSignInError {
            throw GoogleSignInError(error.code, "The client secret file \(path): \(error.message)")
        }
    }

    public var description: String { "GoogleClientSecret(redacted)" }
    public var debugDescription: String { description }
}
