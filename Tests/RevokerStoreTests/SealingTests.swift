import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

@Suite("Sealing and configuration")
struct SealingTests {
    @Test func roundTripWrongKeyTamperAndRotation() throws {
        let id = UUID()
        let sealerA = try Fixtures.sealer()
        let credential = Credential(kind: .refreshToken, secret: "r.secret")
        let sealed = try sealerA.seal(credential, requestID: id)
        #expect(sealed.keyID == "a")
        #expect(try sealerA.open(sealed, requestID: id, kind: .refreshToken) == credential)

        let wrong = try Fixtures.sealer("a=" + Data(repeating: 0x33, count: 32).base64EncodedString())
        #expect(throws: RevokerStoreError.self) { try wrong.open(sealed, requestID: id, kind: .refreshToken) }
        var tampered = sealed
        tampered.bytes[tampered.bytes.count - 1] ^= 0x01
        let tamperedError = #expect(throws: RevokerStoreError.self) { try sealerA.open(tampered, requestID: id, kind: .refreshToken) }
        #expect(tamperedError?.code == .unsealFailed)
        #expect(tamperedError.map { !$0.description.contains("r.secret") } == true)
        #expect(throws: RevokerStoreError.self) { try sealerA.open(sealed, requestID: UUID(), kind: .refreshToken) }
        #expect(throws: RevokerStoreError.self) { try sealerA.open(sealed, requestID: id, kind: .accessToken) }

        let rotated = try Fixtures.sealer(Fixtures.keyA + "," + Fixtures.keyB, current: "b")
        #expect(try rotated.open(sealed, requestID: id, kind: .refreshToken) == credential)
        #expect(try rotated.seal(credential, requestID: id).keyID == "b")
        let onlyB = try Fixtures.sealer(Fixtures.keyB)
        let unknownKey = #expect(throws: RevokerStoreError.self) { try onlyB.open(sealed, requestID: id, kind: .refreshToken) }
        #expect(unknownKey?.code == .unknownKeyID)
    }

    @Test func malformedKeyring() {
        for text in ["", "nokey", "a=notbase64!", "a=" + Data(count: 16).base64EncodedString(), "a b"] {
            #expect(throws: RevokerStoreError.self) { try CredentialKeyring(parsing: text) }
        }
    }

    @Test func databaseURL() throws {
        let configuration = try PostgresClient.Configuration(url: "postgres://u%40x:p%40ss@db.example:6543/revoker?sslmode=disable")
        #expect(configuration.host == "db.example")
        #expect(configuration.port == 6543)
        #expect(configuration.username == "u@x")
        #expect(configuration.password == "p@ss")
        #expect(configuration.database == "revoker")
        for bad in ["mysql://u:hunter2@h/d", "postgres://:hunter2@/d", "postgres://u:hunter2@h/d?sslmode=bogus", "::"] {
            let error = #expect(throws: RevokerStoreError.self) { try PostgresClient.Configuration(url: bad) }
            #expect(error?.code == .invalidDatabaseURL)
            #expect(error.map { !$0.description.contains("hunter2") && !String(reflecting: $0).contains("hunter2") } == true)
        }
    }
}
