import FacebookLogin
import FacebookLoginSandbox
import ProviderSandbox

/// A `--register-…` value that does not name a usable app; `message` says what is wrong.
public struct SandboxRegistrationError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

extension LocalProvider {
    /// Facebook's sandbox as `revoker sandbox` serves it (under ``path``), with the apps of
    /// `registrations` (`APP_ID,SECRET_FILE` each) registered.
    public static func facebookSandbox(faults: SandboxFaults, registering registrations: [String]) async throws -> any MountableSandbox {
        let sandbox = try await FacebookSandbox(configuration: .init(faults: faults))
        for value in registrations {
            let parts = value.split(separator: ",", maxSplits: 1).map(String.init)
            guard parts.count == 2 else {
                throw SandboxRegistrationError(
                    message: "--register-facebook expects APP_ID,SECRET_FILE; got \(parts.count) part\(parts.count == 1 ? "" : "s")."
                )
            }
            let app: FacebookApp
            do {
                app = try FacebookApp(appID: parts[0], secret: FacebookAppSecret.load(contentsOfFile: parts[1]))
            } catch let error as FacebookLoginError {
                throw SandboxRegistrationError(message: "--register-facebook: \(error.message)")
            }
            try await sandbox.register(appID: app.appID, appSecret: app.secret.value)
        }
        return sandbox
    }
}
