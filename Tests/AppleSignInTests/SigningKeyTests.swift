import AppleSignIn
import Crypto
import CryptoExtras
import Foundation
import SwiftASN1
import Testing
import X509

@Suite("Loading .p8 keys")
struct SigningKeyTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func write(_ text: String, named name: String = "AuthKey_KEY0000001.p8") throws -> String {
        let url = directory.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url.path
    }

    func loadError(_ text: String) throws -> AppleSignInError {
        let path = try write(text)
        let error = try #require(throws: AppleSignInError.self) { try AppleSigningKey.load(contentsOfFile: path) }
        #expect(error.message.contains(path), "the message names the file")
        return error
    }

    @Test func loadsApplesPKCS8File() throws {
        let key = P256.Signing.PrivateKey()
        let path = try write(key.pemRepresentation + "\n")
        let loaded = try AppleSigningKey.load(contentsOfFile: path)
        #expect(loaded.publicKeyPEM == key.publicKey.pemRepresentation)
        #expect(!String(describing: loaded).contains(key.pemRepresentation.split(separator: "\n")[1]))
    }

    @Test func missingFileIsNamed() {
        let path = directory.appendingPathComponent("nope.p8").path
        #expect {
            try AppleSigningKey.load(contentsOfFile: path)
        } throws: { error in
            let error = error as? AppleSignInError
            return error?.code == .keyFileNotFound && error?.message.contains(path) == true
        }
    }

    @Test func literalBackslashNEscapes() throws {
        let pem = P256.Signing.PrivateKey().pemRepresentation.replacingOccurrences(of: "\n", with: "\\n")
        let error = try loadError(pem)
        #expect(error.code == .malformedKey)
        #expect(error.message.contains("literal \\n"))
    }

    @Test(arguments: [" ", ""])
    func lostLineBreaks(separator: String) throws {
        let pem = P256.Signing.PrivateKey().pemRepresentation.replacingOccurrences(of: "\n", with: separator)
        let error = try loadError(pem)
        #expect(error.code == .malformedKey)
        #expect(error.message.contains("line breaks"))
    }

    @Test func otherCurves() throws {
        #expect(try loadError(P384.Signing.PrivateKey().pemRepresentation).message.contains("P-384"))
        #expect(try loadError(P521.Signing.PrivateKey().pemRepresentation).message.contains("P-521"))
    }

    @Test func rsaKeyInPKCS8() throws {
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let error = try loadError(rsa.pkcs8PEMRepresentation)
        #expect(error.code == .wrongKeyType)
        #expect(error.message.contains("RSA"))
    }

    @Test func publicKeyInsteadOfPrivate() throws {
        let error = try loadError(P256.Signing.PrivateKey().publicKey.pemRepresentation)
        #expect(error.code == .wrongKeyType)
        #expect(error.message.contains("public key"))
    }

    @Test func certificateInsteadOfKey() throws {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("Revoker test") }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: Date(),
            notValidAfter: Date().addingTimeInterval(3600),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: .init(),
            issuerPrivateKey: .init(key)
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        let pem = PEMDocument(type: "CERTIFICATE", derBytes: serializer.serializedBytes).pemString
        let error = try loadError(pem)
        #expect(error.code == .wrongKeyType)
        #expect(error.message.contains("certificate"))
    }

    @Test func damagedBase64() throws {
        var lines = P256.Signing.PrivateKey().pemRepresentation.split(separator: "\n").map(String.init)
        lines[1] = String(lines[1].reversed())
        let error = try loadError(lines.joined(separator: "\n"))
        #expect(error.code == .malformedKey)
    }

    @Test func notPEMAtAll() throws {
        #expect(try loadError("hello").code == .malformedKey)
    }

    @Test(arguments: ["TEAM00001", "team000001", "TEAM0000001", "TEAM 00001", ""])
    func badTeamIDShapeIsReported(teamID: String) {
        #expect(throws: AppleSignInError.self) {
            try AppleApp(clientID: "com.example.app", teamID: teamID, keyID: "KEY0000001", signingKey: AppleSigningKey(P256.Signing.PrivateKey()))
        }
    }

    @Test(arguments: ["KEY000001", "key0000001", "KEY-000001"])
    func badKeyIDShapeIsReported(keyID: String) {
        #expect {
            try AppleApp(clientID: "com.example.app", teamID: "TEAM000001", keyID: keyID, signingKey: AppleSigningKey(P256.Signing.PrivateKey()))
        } throws: { error in
            (error as? AppleSignInError)?.code == .invalidKeyID
        }
    }

    @Test(arguments: ["", "com.example app", "com.example.app\n"])
    func badClientIDIsReported(clientID: String) {
        #expect {
            try AppleApp(clientID: clientID, teamID: "TEAM000001", keyID: "KEY0000001", signingKey: AppleSigningKey(P256.Signing.PrivateKey()))
        } throws: { error in
            (error as? AppleSignInError)?.code == .invalidClientID
        }
    }
}
