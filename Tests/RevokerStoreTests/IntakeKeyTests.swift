import RevokerStore
import Testing

// Fixtures come from real pgcrypto (PostgreSQL 15.18): `pgcrypto.pgp_pub_encrypt_bytea(convert_to(credential, 'UTF8'), key, options)`
// with `key` = `intakeTestKey.openPGPPublicKey` passed as raw bytea (`decode(hex, 'hex')`). pgcrypto's `pgp_key_id` said 0BB11C16C1852CB8
// for the key and for every message to it, and 500AE31BA52A084B for the key (and message) of another, discarded key.

struct PgcryptoMessage: Sendable, CustomTestStringConvertible {
    let name: String
    let hex: String
    let plaintext: [UInt8]
    var testDescription: String { name }
    var bytes: [UInt8] { intakeHex(hex) }
}

let typicalCredential =
    #"{"client_id":"com.example.revoker.web","team_id":"A1B2C3D4E5","key_id":"K9Z8Y7X6W5","#
    + #""secret":"MIGTAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBHkwdwIBAQQg","note":"naïve café ✓ — €"}"#
let intakePattern = String(repeating: "0123456789abcdef", count: 1024)

let messagesToTestKey: [PgcryptoMessage] = [
    // pgcrypto defaults: AES-128, no compression; 1 byte of data.
    PgcryptoMessage(name: "short, default options", hex: PgcryptoFixture.shortDefault, plaintext: Array("x".utf8)),
    PgcryptoMessage(name: "short, cipher-algo=aes192", hex: PgcryptoFixture.shortAES192, plaintext: Array("x".utf8)),
    PgcryptoMessage(
        name: "typical, cipher-algo=aes256, compress-algo=0",
        hex: PgcryptoFixture.typicalAES256,
        plaintext: Array(typicalCredential.utf8)
    ),
    PgcryptoMessage(name: "typical, cipher-algo=aes128", hex: PgcryptoFixture.typicalAES128, plaintext: Array(typicalCredential.utf8)),
    // pgp_pub_encrypt (text): literal data mode 't' instead of 'b', same bytes (convert-crlf is off by default).
    PgcryptoMessage(name: "typical, pgp_pub_encrypt (text)", hex: PgcryptoFixture.typicalTextFunction, plaintext: Array(typicalCredential.utf8)),
    PgcryptoMessage(name: "8192 bytes, aes256", hex: PgcryptoFixture.longAES256, plaintext: Array(intakePattern.prefix(8192).utf8)),
    // 16378 bytes: both the SEIPD and the literal packet use a 16384-byte partial body length; the literal one ends with a 0-length chunk.
    PgcryptoMessage(
        name: "16378 bytes (partial lengths), aes256",
        hex: PgcryptoFixture.streamedAES256,
        plaintext: Array(intakePattern.prefix(16378).utf8)
    ),
]

let intakeTestKey = try! IntakeKey(pemRepresentation: PgcryptoFixture.intakeTestKeyPKCS8PEM)

/// The worker opens what `revoker.enqueue_revocation` sealed with pgcrypto, and nothing else.
@Suite("Intake key: pgcrypto's messages")
struct IntakeKeyTests {
    @Test func publicKeyIsWhatPgcryptoAccepted() throws {
        #expect(intakeTestKey.id == "0bb11c16c1852cb8")
        #expect(intakeTestKey.openPGPPublicKey == intakeHex(PgcryptoFixture.intakeTestKeyOpenPGPPublicKey))
        let sendable: any Sendable = intakeTestKey
        _ = sendable
    }

    @Test func pemRoundTripKeepsTheKey() throws {
        #expect(intakeTestKey.pemRepresentation.hasPrefix("-----BEGIN RSA PRIVATE KEY-----"))  // PKCS#1 out, PKCS#8 in
        let reread = try IntakeKey(pemRepresentation: intakeTestKey.pemRepresentation)
        #expect(reread.id == intakeTestKey.id)
        #expect(reread.openPGPPublicKey == intakeTestKey.openPGPPublicKey)
        #expect(try reread.open(intakeHex(PgcryptoFixture.shortDefault)) == Array("x".utf8))
    }

    @Test func generatesRSA3072Keys() throws {
        let key = try IntakeKey.generate()
        #expect(Array(key.openPGPPublicKey[8...10]) == [0x01, 0x0C, 0x00])  // algorithm 1, n of 3072 bits
        #expect(key.id.count == 16 && key.id != intakeTestKey.id)
        #expect(try IntakeKey(pemRepresentation: key.pemRepresentation).id == key.id)
    }

    @Test func refusesBadPEM() {
        let garbage = "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----"
        #expect(throws: IntakeKeyError.invalidKey) { try IntakeKey(pemRepresentation: garbage) }
        #expect(throws: IntakeKeyError.invalidKey) { try IntakeKey(pemRepresentation: "") }
    }

    @Test(arguments: messagesToTestKey)
    func opensPgcryptoMessages(_ message: PgcryptoMessage) throws {
        #expect(try intakeTestKey.open(message.bytes) == message.plaintext)
        let recipient = try IntakeKey.recipientID(of: message.bytes)
        #expect(recipient == intakeTestKey.id)
        #expect(recipient.uppercased() == "0BB11C16C1852CB8")  // pgcrypto's pgp_key_id(message)
    }

    @Test func refusesMessageForAnotherKey() throws {
        let message = intakeHex(PgcryptoFixture.otherKeyAES256)
        #expect(try IntakeKey.recipientID(of: message) == "500ae31ba52a084b")
        #expect(throws: IntakeKeyError.wrongRecipient) { try intakeTestKey.open(message) }
        // Claiming our key ID does not help: the session key does not decrypt.
        var relabelled = message
        relabelled.replaceSubrange(4..<12, with: intakeHex(intakeTestKey.id))
        #expect(throws: IntakeKeyError.decryptionFailed) { try intakeTestKey.open(relabelled) }
    }

    @Test func refusesCompressedMessage() {
        #expect(throws: IntakeKeyError.unsupportedContent) { try intakeTestKey.open(intakeHex(PgcryptoFixture.compressedAES256)) }
    }

    @Test func refusesEveryFlippedBitInTheEncryptedData() {
        // short: PKESK is 3 + 396 bytes, SEIPD header d2 32, then the version byte at 401 and 49 bytes of ciphertext.
        let short = intakeHex(PgcryptoFixture.shortDefault)
        #expect(Array(short[399...400]) == [0xD2, 0x32] && short.count == 451)
        #expect(throws: IntakeKeyError.malformedMessage) { try intakeTestKey.open(flipping(short, byte: 401, bit: 0)) }
        for index in 402..<short.count {
            for bit in [0, 7] {
                #expect(throws: IntakeKeyError.decryptionFailed) { try intakeTestKey.open(flipping(short, byte: index, bit: bit)) }
            }
        }
        // typical: SEIPD header d2 c0 23 (227 bytes), ciphertext from 403.
        let typical = intakeHex(PgcryptoFixture.typicalAES256)
        for index in 403..<typical.count {
            #expect(throws: IntakeKeyError.decryptionFailed) { try intakeTestKey.open(flipping(typical, byte: index, bit: index % 8)) }
        }
        // streamed: in the first 16384-byte partial chunk and in the final chunk.
        let streamed = intakeHex(PgcryptoFixture.streamedAES256)
        for index in [403, 8000, 16384, streamed.count - 30, streamed.count - 1] {
            #expect(throws: IntakeKeyError.decryptionFailed) { try intakeTestKey.open(flipping(streamed, byte: index, bit: 3)) }
        }
    }

    @Test func refusesFlippedBitsInTheSessionKey() {
        let typical = intakeHex(PgcryptoFixture.typicalAES256)
        for index in stride(from: 15, to: 399, by: 23) {
            #expect(throws: IntakeKeyError.self) { try intakeTestKey.open(flipping(typical, byte: index, bit: index % 8)) }
        }
    }

    @Test func refusesTruncatedOrExtendedMessages() {
        let short = intakeHex(PgcryptoFixture.shortDefault)
        for length in 0..<short.count {
            #expect(throws: IntakeKeyError.self) { try intakeTestKey.open(Array(short.prefix(length))) }
        }
        #expect(throws: IntakeKeyError.malformedMessage) { try intakeTestKey.open(short + [0]) }
        let streamed = intakeHex(PgcryptoFixture.streamedAES256)
        for length in [402, 403, 16_000, 16_785, 16_786, streamed.count - 1] {
            #expect(throws: IntakeKeyError.self) { try intakeTestKey.open(Array(streamed.prefix(length))) }
        }
        #expect(throws: IntakeKeyError.self) { try IntakeKey.recipientID(of: Array(short.prefix(100))) }
    }

    @Test func refusesRandomBytes() {
        var generator = SplitMix64(seed: 0x1DEA_5EED)
        for length in [0, 1, 2, 3, 12, 50, 451, 629, 4096] {
            for first: UInt8? in [nil, 0xC1, 0x85] {
                var message = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                if let first, length > 0 { message[0] = first }
                #expect(throws: IntakeKeyError.self) { try intakeTestKey.open(message) }
            }
        }
    }

    @Test func acceptsOtherValidFramings() throws {
        // Same message with an old-format PKESK header, a five-octet SEIPD length, then with odd partial chunks (1, 2, 4 bytes, rest).
        let typical = intakeHex(PgcryptoFixture.typicalAES256)
        let pkeskBody = Array(typical[3..<399])
        let seipdBody = Array(typical[402...])
        let oldPKESK: [UInt8] = [0x85, 0x01, 0x8C] + pkeskBody
        let fiveOctet = oldPKESK + [0xD2, 0xFF, 0, 0, 0, UInt8(seipdBody.count)] + seipdBody
        #expect(try intakeTestKey.open(fiveOctet) == Array(typicalCredential.utf8))
        let rest = seipdBody.count - 7
        var chunked: [UInt8] = oldPKESK + [0xD2, 0xE0, seipdBody[0], 0xE1, seipdBody[1], seipdBody[2], 0xE2]
        chunked += seipdBody[3..<7]
        chunked += [0xC0 + UInt8((rest - 192) >> 8), UInt8((rest - 192) & 0xFF)]
        chunked += seipdBody[7...]
        #expect(try intakeTestKey.open(chunked) == Array(typicalCredential.utf8))
        // Two PKESKs, or a second data packet, are refused even though each part is fine.
        #expect(throws: IntakeKeyError.malformedMessage) { try intakeTestKey.open(oldPKESK + typical) }
        #expect(throws: IntakeKeyError.malformedMessage) { try intakeTestKey.open(typical + Array(typical[399...])) }
    }

    @Test func errorsSayNothingSecret() {
        let errors: [IntakeKeyError] = [.invalidKey, .malformedMessage, .wrongRecipient, .decryptionFailed, .unsupportedContent]
        #expect(Set(errors.map(\.description)).count == errors.count)
        #expect(errors.allSatisfy { !$0.description.contains(intakeTestKey.id) })
    }
}

func flipping(_ message: [UInt8], byte index: Int, bit: Int) -> [UInt8] {
    var copy = message
    copy[index] ^= 1 << bit
    return copy
}

func intakeHex(_ hex: String) -> [UInt8] {
    let digits = hex.utf8.compactMap { UInt8(String(UnicodeScalar($0)), radix: 16) }
    return stride(from: 0, to: digits.count - 1, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
}

/// A seeded generator so the "random bytes" cases are the same on every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Test-only material: this RSA 3072 key was generated for these tests and protects nothing.
enum PgcryptoFixture {
    /// TEST KEY ONLY (PKCS#8 PEM). Never use it for anything real.
    static let intakeTestKeyPKCS8PEM = """
        -----BEGIN PRIVATE KEY-----
        MIIG/AIBADANBgkqhkiG9w0BAQEFAASCBuYwggbiAgEAAoIBgQC2RfuV4eJbp8kc
        dwQlDHLYlZVTtE6GoMYZSM6/kjI/LmxWHtmaCMoASfq/dLSwQZ/KasjIcpt+omG9
        MH2+Ne2A/dAcvs6HtoZJOa/f9I17JWAbWwsfmkWWejodrwz9tG0yeOPNmYnA9Pl/
        wu6VarYlOt98JUNAtyYH6QJx/ecdMAqUJFd+fbSQ2yJTxhXgEGIGX2AcNZkW07CW
        Elrnu/GjOttPdlGVnI9TspYTxKxRMcvIsSNimCjWlaMqVzXZgjzyYBlXjl2W2YRD
        yISanKUe1SG0zFSCOZLkd5OqtGDzu/Ne29MrMSsPnWi9oF7sTmEzSj0kXoK/sbcT
        025Wi+9onj5paoIsAg/St9DIsHRk/5N0d7bjRN9bjLzXzP2LD2DswNliqSe4CyQk
        REKqBwdqqGQZH4QD16GpzX1Iy2MN+gnOVmeK38cKIEsvUhPxYSSl6v0qYo5T602s
        DS5wR3AUcb4XR93xcrlqOwSriPx1MTZfcC7klElerHkVPJykYPUCAwEAAQKCAYAD
        A1dg6xPBAw8XA094DYzr/WUGH2Bg7uBCvepebHLJP0smWJfaf9HfBKVYiikMIgTf
        bRQdqcuStIAd8JAIRLvT70eTIDBW3730Lt2lO6/4c1dOA/1TQniYXeiGvER24pZb
        wPAvy7QhbPaQSmW/1yXsQHPFp6bb1YlXHECJ62L4W8hqZXCStE5R/2TfsnewGu2y
        A/psGTDWe5XxwlAI2t1CeVPzlXAfdj7mLKY47Nh7qx6mJS2YJ5VKahemz3gD4p//
        wBAe1Rz3pLPQLnLSUtvDgpxXblflSId7rzFClMjiHLAshhGxAcoi4TA+T+daDS3U
        x1ffXXeuqeVPlgUwpk5/4lbkvLt0zAvkvej0IfH2QUVOy7FhC3KAiY8cNEsYlSPo
        tM9mX306SbAq0AKgWGVBUhpmmHlH3Jdwrbna5T84s309CTykON7XqQRiIVAQNVed
        EC5YjKpsEtQrlV/wpO+5jiHrHQNKVBTeuJwdGQ2VTUljtkdUDkUH1zTDtkWzre0C
        gcEA8m5YCbVKxFrxaTE/wN2Miuoo6eesn/NH6VjNmhozFBBT83uNL9aV/Fo1tqEZ
        uXEZERKUwXEp+VmTHXmavscptP4OEKQkW/0wF/TDszIcTtQTzrbD5KCUYIaeBF51
        hD1T3CBRJgAh3gz/QB1eTqX3aatS7/ZpBgO9J5pkklbHT2sWX+Qt7np1f4iGY9cY
        SPJZhCL9lhlWA2T+HXT2Tc6BBE8I624vaxqVKOnXcCuqX0U1hDVaGG70CffyL9tQ
        DdarAoHBAMB5rIxJvYE273FYokk0UtRwAQaHrv3gla+NTqyGLaJOE4iJb8aSgrxS
        y0h1yxiUKqlM0BlF5M1dxqzoSXmc6ba1Ow9DAWr/qjxp8Hsu+rot03My0e65sfFn
        iG0SmA4anngxwBKOEUK8m7sXKhuHxY1LwJxeBmGz+dZP6R/dSntu5b2e4RHCYQah
        NeheCe922yHw5LRPMJsfkocunu+geeEd+x1XQhBzxSCJyh9/NxdJfFF5TZg2XlN3
        vMPGTCsm3wKBwC79gmUHVeGvewGXwTLB/r7iWmHUPRqXzkWFp/yJvYLTE2KrfRdb
        saDDX4vxuAnAyUoM3vaL18X0PdbFvl/iPMxPPiytlDqcXdkW4WP3f5Mr+lbkCB5l
        nb0D+tb/9ClYtcuCHBiQiAABZuxnhOMbulQqGB5ZFcxLpzto6ruOxH05VZHqqZiC
        9gltThdGFvf0ubMqERsp+AkaZ0MQa7lzIIDUTPdNWTWaZnUStmaQoCptQM1Khhcc
        UoMoIzJxgRfdlwKBwEh1hd/KYu0iIUIqe+3TJNuUzs4GhnpM8g0ExXltigBwJCpi
        kxHOVilPgfflYHAAV48ku7LH/TrS8thlGkQOLm36DCHSt9XwKcZUm5PEO9+bIN9d
        YmrcvYCD2Xg2Z8fnfYECOazCjvzwxC/KqK90jYqD2h8DxqNBfeyQaNL2G/Qb66FX
        DqQA6UX1qrWvsU3VEOnWJkM7DLFZUXBSvMK5RyjYgJCrKNPIwY1eUhlJaxP5NjP1
        1qBW12vUx9tr64DTQQKBwD0VsFbJb34Do/158P6r+x4IlwaOxeRAmD8xTGfX3r7H
        pZnmSzxB5BkcgPrxLEWZR6qmhAYFEYPSC/kSyvPgCk0nhERKdhFVDUAO4f7gGybj
        OZJ5n0FLSwHDbzovDZYYv0npz+ogYbvHu8PzSX+DfV4t2yjCYXBp3o7fiUFrDD0s
        eo9CYFaQmi/gJrGtg3TPv2U+gglxO+B2CMA8C97Ouc8hKXc3Bo8P3aeKkZOgsEww
        AWjKWwjTzYA3ybfnjK9HrA==
        -----END PRIVATE KEY-----
        """

    /// `intakeTestKey.openPGPPublicKey`, as given to pgcrypto.
    static let intakeTestKeyOpenPGPPublicKey = """
        b9018d0400000000010c00b645fb95e1e25ba7c91c7704250c72d8959553b44e86a0c61948cebf92323f2e6c561ed99a08ca0049fabf74b4b0419fca6ac8c872
        9b7ea261bd307dbe35ed80fdd01cbece87b6864939afdff48d7b25601b5b0b1f9a45967a3a1daf0cfdb46d3278e3cd9989c0f4f97fc2ee956ab6253adf7c2543
        40b72607e90271fde71d300a9424577e7db490db2253c615e01062065f601c359916d3b096125ae7bbf1a33adb4f7651959c8f53b29613c4ac5131cbc8b12362
        9828d695a32a5735d9823cf26019578e5d96d98443c8849a9ca51ed521b4cc54823992e47793aab460f3bbf35edbd32b312b0f9d68bda05eec4e61334a3d245e
        82bfb1b713d36e568bef689e3e696a822c020fd2b7d0c8b07464ff937477b6e344df5b8cbcd7ccfd8b0f60ecc0d962a927b80b24244442aa07076aa864191f84
        03d7a1a9cd7d48cb630dfa09ce56678adfc70a204b2f5213f16124a5eafd2a628e53eb4dac0d2e7047701471be1747ddf172b96a3b04ab88fc7531365f702ee4
        94495eac79153c9ca460f50011010001
        """

    /// pgp_pub_encrypt_bytea('x', key)
    static let shortDefault = """
        c1c0cc030bb11c16c1852cb8010bf901f3b8b5683549f4b16b3ef211e89f2b3c89aa793f1fdd1e7601e6f0ed45d77e55238c05d1b77aa2c69424eb850c7e376d
        212f0c5a44130ac85dbd02f8b583e327e2385f522a46e4e0b175698e8e00854287fe6b3d4663fbb8e09116aa9e4d4f0f2e50598ace2080b26915ef8908232253
        ab32a384a35afb5467a4b8a1521dee2a6c33101c1598dbed08e6f8c7967eb65425d3b06e10bb4c03b1aaea715964b4a205f2726c10410c9b28ebb3d0171f7f88
        b0aeefeb9cc6e6574d8917e94947032a2876dd3014788213a43eab7f9c3c1a062ecc969c4d4b82f7cc0546374a408201b588ace36e6adf1a7b460da748d2a9f2
        7798dc113854b794015e14ebcbec8a4b6c9307f7fa5ddd1a539a2358352c26049dffdc201d64345b069a242dd24e683c221049f714d282f36b650c9e91a44f55
        38fbdc414e02d538a8aade07a6287269e9da14f1b3a20adee8a198275a707bd51de44645d40d0501ae9f3c2f643bc3bf84221f78f16301d6d723e081adf8881c
        40d56122dfe475b3e5d91b795e45b5d2320150e8bb8c871a44f924e990e3f42f3006f8c40a2725f4af92e4cfda6389a4b1b7362216ee9b847335c77aa0dd0e01
        fc92a7
        """

    /// pgp_pub_encrypt_bytea('x', key, 'cipher-algo=aes192')
    static let shortAES192 = """
        c1c0cc030bb11c16c1852cb8010bfa02069d792db6c168bfb70d794af518c22daafa2fcee600cea4a94fb45b813283d2cf1125f79577b02fe8ac99ded50348a2
        a4ddf432b3ea5c5800a13a99dad186677f217b451edc4d92a5e7de6f4ee1c596e74d227a698fde78b21715f7a0036a6134d03aa0991509cb726904cbacf8aa41
        68643c0d76e3370d217d3330e422b85538148ea1ac56d97ffbdf29feef44396d6ebd310d031524a7ecd682ca51c9c51f2e38c3faee3cf77f4b1490f7ef216c38
        6785aedfa0ef01b4f64b6a5c6a57144ec58bed74dbf01bc1ada03fce95677b48269430eb69f034c62871d30d44b37b915da4ef4c6e7ee29b5bcf48e702a8140a
        785bff43729cc4b61526e603ba97fa13ad748a33a1f44aba54b4c96435ebdac86bf5bce83af14b2c2c19808f31a1fb3c8bedff0e2f945427126034c3e0e85a44
        7f40ce25ab45775cd88f30d7bd60054061857e5117a2c5f94f24b64a9c2982a45ad9a2c6015eeca191be397616d9b0e9309a5fd90b73b1cefa770dbdfc3b4866
        f2258384195f8ff7e163b3dc05aa1dd23201b2d613dd385325ff07cc59d28ad5b2efc687b2ecb45d91a4f12e492fa621f21855278dcc3d4e4b3778f7719e5b76
        80a4c1
        """

    /// pgp_pub_encrypt_bytea(typicalCredential, key, 'cipher-algo=aes256, compress-algo=0')
    static let typicalAES256 = """
        c1c0cc030bb11c16c1852cb8010bff526d1e20df2497a6314713b258225eef9d560436ea72f09adaf009858d98b4e34b0c420905cdcd6a783b9e4bf45dea2a79
        5bcc2a92d4de33429028087a39b4dada17bb9c4281030d700b5c0280a39bb7b8b5f0e6cb76e3103247e69cadc778ed778e8c65b7b6a7fdab04eb0602d942c8ca
        cd1b96b3d5f946d797d9949ccc96984bb936cc8ecd2459cdb0bcde46efbe7c17ab4ed377e0b379bd6a5cd466c2a249b158d94f36478901fe50d4157292f3993e
        bf87e9492fd659b5ef0bcfd33e9ef4af520c50f56c84dd4c02190ca5489af43d6f81661b569474842c458cf5fda4d8708fd58b37e8764f51404b48b7827bff70
        5ce2dfe3fea27f49500f2b70c6d4dab798d2f6da509e565c207ab6c19108c397c1f6e1865e076d1460bce64a1b6345ab10e5f823c4b88780de5deffa47266042
        f64060692adfd8c6422d120bb289cccf6644b263192afc4a6a4f9ba2fedca238d68bfdf77c7146a76fda5194311d639f06a9b17b900cb02a5b1bb416bc7f4006
        fb5618d9135ab5bc08fb82127302ddd2c02301e284f75ba7f2a630225d12dc9c14af54a5b5e3b60946ddbea1a860e81f8273d125867d29fc8cd5f502541d7058
        80881f065390b5b57d5569a8a7fc4ce3926691dc8a0533af6ab6007a5892c95a12d1d8442cd26e389709ec43a467945c61579c5cce621d349d8f13f7df4fd37e
        4a15125c31eac08ba5dcc31e16dcbfd65aa1d648d9606ecea280a2bd9027fa22eba20ee875e69094947ecb6b1d48bea1a6196f02873f87e4ff521dc650655d3d
        c482ef83f0b72a7c34a9d4ceac3c92344dc0a0051554fa6616250592ddff0a65cd677d1753fd54c3aa91bd7078690354b6b4f26f25
        """

    /// pgp_pub_encrypt_bytea(typicalCredential, key, 'cipher-algo=aes128')
    static let typicalAES128 = """
        c1c0cc030bb11c16c1852cb8010bfd15ca8aa1acd6b6eec142480702f132378d4437b4de4f94df609cbf6725fe9888133491c076c7f9a1267f3d05832f2dd601
        9d807e3c1bb4ac6ea35d0b4f3664d16e916622c08981c076c7a7b1a89ac45733a843e52ed5f04d1e2b6fa2dca025e30711f3f64f22d90a1d4a082fe47d152eb0
        c35b9b6d95bf328b2deec90a7a77cbd5b18bff07b7a135e9f09839cb06336469701abc52039b2d37b879ac28933e6550876e26268aa94e49c664b6e8d73e565a
        7f9b4e4e58a3e6e89ba4601a14ecaf1a1ab66636b9cd5fe2404f4c1a5ede52ffa880bbccff4ec960d1376f8f64d8eb5465fd24df798cdd6d059689ce6268f498
        fdb4b68394485f2cef330982015f59f061c9a2b0991a0dbed3db36a2ccf1f1d3c64f1366af8fa9e1c483fbab3b603c8a45c85745ca028fc5cec07fece640816a
        f9d5f72326a0324bf26a1a9df7af65dc55ffe749aa7a29a82f756a93d98a4f78dee1821a07d8eba3f112a1103edd6605ab7fe6c6ff751c860712e07803a7a98b
        04d93ead3846f30d1384b3731058e6d2c0230178e6594fdfc64e2965261fda62b5292675e8fa500f76c9ba54af302d2b07e14308153e2e9aee70b92214552a42
        2c63e0008d59be4011788d4c4a443ac2d22771338c764285354598f8f10ec755480bfabf3e9a374e323baf46591435d3fbc6757dc22eef0623a06d29bfc5030d
        ceed74eb3b36db411d9daca3e524f6f6acd6e17fa952442b8daae8f9c9018a5519a9a89d79310e82b06392622d5d6e37d0d411e7cab87beb4e1dbf427dd56e9c
        3634482ddfc8a1db944b8a460263d099058a48873558634565ed3bf46239060ad67688d86595aa6cdf42cb0b0e8f1c001d0ed191a2
        """

    /// pgp_pub_encrypt(typicalCredential, key) — the text variant
    static let typicalTextFunction = """
        c1c0cc030bb11c16c1852cb8010c00a08f16b5aef7b54d6fb9ed83e821f74f4678df1b4340bf565ad607f602366234f6b7b12fe07d582960bc316454d9cfd1b0
        40b6d82833e0450e196ea5487a463fac0a63a4b6d7929208dca0593436ce7020c64b35c1f70326969a9d34f46e9c54c296cc7ee2d0cd3a4f3fc394b260d29f2f
        0762a336979d1fa8386210be21cb4b9fdfa6b2396475dcb02006332a6902958c77f79ae05928c08dd19d64416fec14c27ec9413115189cd77e22b515539d617a
        88818ba623668f5c8e7b945ee99ba2e2d6cf36d36f074a189a12facd82b581bdd44f1113330ccc86fa393fef7095b36a21609d4c5441afa980c6b5e338e1f41b
        484c7d1e87cfcc0a952984377a34360df62661271adb4c4802ede812ed65b1a62ed985bbd96a642777504e4b3fe18fc9c899e05b483d28150eb9ceab2ef944db
        17f23dc1dfb59b290d84fb9e27aa505eaf71c5f1f102310e1101a2abf3370e54e49d621e0dae1eb841aeef016754dbac6abed823f45b9f4fb4df442e6a70fe51
        b2a3b878b28866031f5cf43d590394d2c02301560b86fd2e68a138ef70b2aedaef634101f243fdfd591550e35406f7f35345999b79248d31c92cb2b520f87959
        dff9d5840b47475587bd0b8785cfc03dd697ea7947b0708ceb058e6472c5b8607d4636cb76a211566173dbc020c631653ac2918d63667f806cc243276b197229
        8d98f2677514c29898384addbe838a03cc212123a2458eba1232fd5b9f8c9d772caac14dcd719a37a49801ee238a341d465c56793de8931fb29e344694bda6f5
        0806452c2901b04aab1f534e42d14cb3aa095bcfeb044118c5754e4c64ca8fa576fe93c72cce5fa7aaba1d0a28a5a994f4353af6db
        """

    /// pgp_pub_encrypt_bytea(8192 bytes of pattern, key, 'cipher-algo=aes256, compress-algo=0')
    static let longAES256 = """
        c1c0cc030bb11c16c1852cb8010c008d34a334a1e8e35e207000e695c27b250488859d2737728d51889bb508476a7aec2d9b07ebd4af13866de99ed7e01e3907
        2323a664bdd627acd15f4189b3106787385e4365939341b06922e3efd3d85d6cafecde42678d8e79833a9a2695947f7995e897f98b527a1eeac673e113c6efa8
        5b3f7125ebf9c3dfa43c4a202723ae9e9aaad5abce93185ab7ecc03f28c8896642a683ee0580bf346ce0bd2347cafe887e567e27c493605d1442a4b4dacfc595
        ecafb7b802c975da51faaee61f20bcd643824d11fb6009f25ed8fd1d97ca315e8ed3935d680e9882d71be82824f58b608cb50c9437fed2e88c7b176c6b07acc1
        1ebe241890d7d9b6529ea9fbc99bb1325082dbb37110579b2d4985ca511f67a3c6e8af33bbd0ba5d592a8ab2b8c56db365476490467212d8fe526f87a6930588
        c8dbb8556b58324d5b41a0c0d8c8b1f9cd670296a25ca11ec32f854a8069c2f03dd7809e892f3f22d7b2c2fd1fa0a44ef78dec9bddcbb3654c9fd58d8beb36f9
        c0fd2ec9e1e6979c2ef720af0cce4bd2df72018eb536587a8433d41670fd7650de17b494924ba6867d3fc0e17fa214f1f3a689b8017bc3a591c33a6d812deafe
        7b25fba1ed0c20064484aa7b349f0802c027b6cc7ef878d381a5c5ad0d87834c79e30a7dbb770f59033bb37b3d9eb4cf0623036ee9bb752f4a9b094a4963d114
        831787d0e0a9f221b40967340c20495142b4a0aa6c77f47179c1d342a041028c5b1235e3fa0b3ce58c4655637fc1e904dde3bea198d82660c03ca5301f176b88
        fd4f5bbd95bbd5a5566b20e2232fbf30ce9f49cdefda6039f9042884cc241e759ec7f4277d69a699fe618fa8af2eefa2a450d8e2a4734613f2e332ebd33ff9d7
        dea0a3f806658c73ac50f9d2a6b100e3e587714ea1bf4dc32f5e394061823a0e1682802c3e7d2e987c512a17679f113bfdbd72e51223ab012fc7064131f49d5c
        17f7b6b7d3c3851d4102df478eae4923f283715480fe68e6eb76560098f1890b77693bf1fca40f0ae4d72740fb942f4959bf2783547a0683a6483cbb88bbd348
        e06ef4cd41459024a5f76e181521bad636a5d0f928395f22cafeaefb3236e6b9fa4c624b0ddd134eb129bfab8347c20572fd4833a09cdba0f3048711a897bccd
        0f44a07fee206d635a522af8362cce9f5d61ce44b6edcf15cb5f39a8dd9a766c10c3e0f696690fa78f87a799b679bc961093b057b64b537e016485db54d24a04
        d38e20b4150e765edd98ea684767b2813a11cb5ebfeda73d4b7e750cfdf96e1c24c66334c051bee2c1e537f5399eb40598877f205eceb9cc59889def8df47ad0
        e089336512fe24f16e5eff826bf3d5f9aca44f3e0343261abc43756a74f921c1338c1df8c878b7fadd65ccc27f70ef78bc3fb4658445c3522d6ee18078dfaf61
        7072c026f9e14d08c44e0723f1a8546d057ec7cb4992588bf2dc2dafb1a4779ba70e0bbf6e84b451fc77e55190f9eab7d28104e20a8e0097c83e7c3c43db3aff
        b759d35834cfb30fde57860bf330a4abd8c423b3f5373627e45ed8b1f1fd91c19f71b4c63ae5eb031d01c6a58f13432e1d5030959e6fe9680dd3aabc94e4935b
        37acf5a89a4707889a39bf133e0a412bce9094848c65d276f7d3e3e6d197f86034e5995aff7ac163342fa1d2b3b2bf53cf8d2f95e064ec202231ca3b0f65ca00
        5c3ae84093c3068d93668538ef3d7466e627f581fbdf5ee293b1feebd553491c7bffeab12b523c725e710a7e4c584ed52a5da225f89ec6aeff62ff82cb32a99b
        0ce2154be6d9f11110695dda331a0b358b44ba40d6a5b6916159ad23967dd92c3c9b8c92e1ec35daf3b80127a5b4c819b12da06df0113d8e1155abb0fd4008ca
        35e27ced1a768df985ff6f5faaa53fdc96e406242302f853fc39bf64d21fb21fc8a9fa8a883002e6dfcd71e4caf7775bbb62fb99bb136becf28ba9093959168e
        e9833c997f5d911e98d34b927dddc29f645a1f5fa025652c38ecdc6884d3949aa548b03e232163cecf9cb455bc49f7264a1226c6f109e2921b930648ce201363
        cda66c44c73ed294f9fb81274edae1f625d7ef7ababe74f34921cdecdf80e65f037ae7e99e54e19489f91951836279e4a5cfa8026e9a6c0871546daf2617d89d
        fc4ee037e2e9df81ce5548833ded59bfda527d537735a91fd417dbb457edf1a7cdf9468f0bcff5fe9832d1ae38c28293c805fdc62bd6d3521a211ec737527cb8
        2ca273a60ca9bb55245721e624954d8dc18e38ad4865c9820fe8f9de6079e248d94b855838cd5c6c828a53b3c1cbc678e4d17c17df6361ee99b9745801900a9d
        5b9419db2b7f56555bae5ac1b940e75204cd5c6bae6aa858039c6427e405503bc1385a6e10d743d51518d2d7c1c4c62d9caee6b55ef29c51b31e090f158fde83
        71966131740aff93a5f6a41cceebc3943967bad11022cd9ff1e963c3f7a2de0a034deec2c76a1338d15cda6ad2ef50437bf7b8a13607dcaff1ee060b5dc78f6e
        ca3c9fe52a67b8683fed0690c0bfce6ac40250b0fa3cfe370e7247791cd0ed5ce1ac4195f0d23d4cb886c826f25225f90ca9a443a25cd62931cc832018c758b3
        47622380cd185c32119ccdda95ac1c670fd54bae82512904106de5493fcabd6f1d33d9589fad3c7993be21c8bcda3bcff302ab188f7e77b1efcebfb5606e6093
        021523bef7d0aaf5511434391425d9c23ce4cc989b4a67b3333305460d69181753d86e53e6784d8090d08ee2c4972cc558fc8dca63530c3939f30b4e06aae3ee
        9b42f1860f6dedf23fbd5066569b0cb755038f43f28556381e7c7184df7790254294e2f7652e6b733a558b9e995ba28380f966144869faf34c767387d0776f99
        af2efb673312f82eb47ec0bc0a452170baffc4eaf04e881d75fe7d1f8bac774baddb92598702a666cdf91180d1d385d3fc22080a989c51229654dcec61dc40b4
        166dd79ae0e2e265d0ec7a068fc0e62aea2d9b63866b2f1c616f1d88fbafc8227d34b8fa47bec3b8f5c388dbb996f3a48f331329becf23125cb3eb5cb725bd91
        6b41b609c3b0c18e895fafd63f157ba35f043ed8fa02aae0b322852a431479ff9c03c14ae6dffbd8c394e79d0b737cf843361ccf7a3c6e290a6f1a6a93f45722
        408d61860b8ed71fdcd920f1d51c84f1d4b835b8decf9c3d1f05c402ac36a2d8c04d29c6df94da3e3df99f73bff1150443afb534524de8461b84269bf007c48e
        ed56789bf4da1f5be4c546c585c6e652019aa90f8d242c08e3724b4a6c2fa20ba4b549a7e80e197a2a14a05d2b282cc2bb1da00935ad9b186d7f0f2a0ae2fe42
        7268bd0b9374d11de7a29055fb77e6f3f3e004d9dc98c3441c03e5ea66020e7efc53377b6c81f09b74b670366ec2e659d40210267a7f0028d314ab6a0aa17aa0
        df158e82d8f391ebf2aa619e85e3b18d95d9587e89267a02c44ac8e4b94a6b381caff7f0d04865e2480f0aec9e2342e34a57445b5f2f291dcb3dea547e3c4dec
        b068a4c410d42bcc36bf36334688d3c7feb964b8364847524c735106fcc421485733b70e487231ac889e5affe1548906d8d65dc49f3e8520614206dee259e1a1
        14605059d7fba3282912cbaba1b21fa903781e62c3291bff2c661ce96447ee118272220cda6210de4a4e5bce4dc9b18b54e3cb35fce81819d14fe573fb71d584
        ff2aed8220c2b2312923476f73a92fec34148484258a55e0c26dec27eb64710324c655bb8020cd1571aaf6c66b348cc780b58779d179c3c8d0b3e47587b33739
        53aadc7c2008abf97338e3f4369f7f72ee9f8a22a1c9f807d6757a81ce83b30c7c1f9094e9e629b474a3b6a7d602a4a39fb4ec6bf4a499e48c463977dd9e8c27
        89300b9a98eb5d501b2350ec557f50c01ab6f0ddcd3a4756a208a38dd5cf6253d197a0119b68eced5049a8ab3a60990ec72777561cfbd661d6489b0634d7a986
        4870ecbbed02f55edaadc5c2a3681a63eda6912325e93ddba5f6bff00755efbfd27b89823ce7dfd6c3f49f9405d791980d9e5d8f39d8ddf36a5fef173a1df389
        ea8fba4f9bf9b2ac0a1255ab52b6d319e3a833230dfbcaef56c3fc92d94b574aec9c1b95073eee58a12da2a2eb6d5f645c9627f585d9f0af230991887cdfca03
        c379f73c6b019348367164d5564fdc2d491dba4b9e6da5744ea81b086f1b0d0f57234d275fe80c0bde159bb25ac9188dd47859db122a2b1187726fffda58923c
        8870d3ba933e5a10bea705737666a6d6158caf88bbfad6ead94a36595658b9eea37d8b9bab405fc3d12098af1c6a23ac581f04e6d6c0d954e9c110a6f95a4724
        f0b171ae06b827db34988b2c8919304943e30794b2d96af52cbf7b8733c7f92f185d2862612c09434c7c10c42ddbc877281f283e12da9851f0bd1e6d2c9fc6b7
        69cc4592d62f54fc0afea41f93967fcffab2860a41861a4f3b5e1f63ae73bf715b2f53ac2e5815daf2a82e9926d9f9e5a21f420b88e014b5fe383920b332811f
        19866e977905b8ac86d75bb4b0bcd04f9d91e3562e8d38fd95c5f65d6008aead4f4435ad03a07d38e987eb077f1100a6cc42ad5595b38d0f772bd2032708c4d7
        351f3ab487870e2a16337802350da24e746ee3f08fd6e61cbf522191973762f51c31f9ef58b0999d70f824ace75b2d38d0ca829a9c19464a3aa1e27d98dc44fc
        85bc735b4a8c49576543f1ea7a5d685fcaecc43b4a0c524f3d8fa156d39dae8879191b46114bea4bc5e565f39ef54be95af508f13c57dfd84c5f653552954daa
        9219ce3cce656615935aa3df280f203599b64f6d67af560b760380f762b5b8d7fd1fd6b7f32a655f470e2532e73485c62b235ecad372005d3957148825dc3798
        de2bbb333ed5b8ad80ca1f5e6af2fc77aec8e08d108d7cc7a2e7ec7de2eadf022f31144e75e1b80dec7fc2f64055fe7d2ed17f4c90565029bfafd61e05573418
        80dabc29f246c0d88c29661272cbde468803304b86a15de1856ec876728c589fe90b6b9bc3b9b438ecdba655a5b6f280738d2ee358cc5082c3ff04f118f51ebd
        9731595517b46ae3a8b8d2614f742fde03cd8a29ffcb8d189144c2eb5538b817b9795132fa6e6c2d984d0567412112c324fb3f1c1557a67243e005c2eea0f016
        fe4341aa91897b10f263faf04455483514da6a86e96c6faa5a07958bc56af32ba28e421de0372114700e9bd24a0437d6d2f0368eb879eb78833f5fba74105c42
        fef7ff466529767786b52b20f39f8e30c3b306f682b45bc682fa88593b2a471a29294c6cf1d4c61b9df90dbe43baf875d59c849a06da71cb260bbd0bf9561edc
        999a652452008fbdf115e4200301ac3840522c16b092658d9a9338b49c259144113951483ef4840c66ee86402ece2700d8e82e71caee1dd5680ffc406e202aec
        e27e58c8a95dcb84ab2e1371308ad561adee17f877318e35dfae5fd93bbf0f8353126ef3d5e6d4b257bc2c6a311a1e7ae9af2a968668ccee78027cb0fc421184
        8b4b75694efe76136bae37ae3ea3d61b99de3c90f966bc5296e53a723997ca5920845be1f16cd76c3a095bf73c83e791836454ec7c9a211dc90229a4313f1b03
        941d47100a7e5c6c0df7b30edad9568b2e7c98bce1bf6472c09703f00c302c57890625e685b7c5df3e730c1567f08083e802a134c0aee344e2b4ad0dddc8698f
        197c45257ad12b9ca6e7762770b2a90a2817bbfaf314f008af5c52a115b80f49e357a985f202b5c635d4467fcade845acd4003f4b8214ea5cd0a101185c5d709
        1bd88a9219ced1bd515e75e4877388b6e7241e6e5caedd0ae6d792a54550ce96a782f51bf509b3059baa1f66e8a6d6706738c5a31aab6aae445fd96c1355f3de
        09f56de534d1117e68a3e2005890ba9272ebac77b230d74bb7e7f523c1ebccf27c13edff88497fa369771b6510c8ec5ff89f1c4870f7b05a2120b36b9492d24a
        704f645e1077127a42f8a7569545fa349e9916580d64e01af69716e6f319b5ca21390ed8db496f21b7957b42a0b7661a22e02d4c500b11f75e67aba6a60055f4
        cbdcc9833ad4e0fb275c2ae97955868fb65d6c4aae05592f41f0128d1a9c0d174d517dca2a1064fbba4d0507639e104944248193abced700a73a2cc7d7029bdc
        5782494be57a43c65768f5614f6e4defde8fc5b55695d3a11c88c4b2323eece3bb156b0e7271a6cab096ea3f514273604a81f98db3cce31522a0f62da4e736e3
        e267fe6d4c9e3fc66cee95884e9d86e94f9ce01ca7c7d300949f2384a37f7c655329b2aeb4650f996b84512124755e6d321d3c43b75db7da7468bf605447de78
        09495c9dac1de67573e09ba834905c146433f26ac90fb252d1ebdba3d962478255e1aab5d1c54fe2fcf5563285ffe688b3f236532511449f0993af81d65dfd64
        96ae08093829d65c198b5eae6c553a176c41b5ba66aa2991a7a2b0d15ea060ac68a0a90d76576e653ad0464b1b8e82c951a83f7ceffc9928174cf8427c893047
        cbb74bee03cc558a436d3fb4eec1b5c59eed421b96930b44f9c1e8492bfca54792b5d269cabe5af5389fee9b598d4e45c6195c816695608bf9ac6c65e3c4f563
        f1a523e671e15a4839bc62d0207867731d218cee68c8f7ef0ce9ac9c938b1573a847ada32c769af30b4a9f1b7dc361d91c77e1ec6204f03a78f4b04ab518b849
        57f3785541d0b48bee6d4e695bc7148373235a0b43783ad02084a703dc4ec3f063c5d40723643eccb2a7740cdcdb6c36b62d038e4b03755d4767eb3e82c55251
        c7394a2d49ef6c23f6f0bac263bb31a15cb6f34537e8ae36514fa8c5ba5abdee57c73efc87e99144ff5f98d7cdbf3f2bd7ea71ce13812acf1d7ce3ba7c167bd0
        69cf4c1adb79e4abf4325b9d192d81e51585704a2425395be5348409e8444283fd34838f1c47250733ad977bcec18b2ac33c7df7a5fd93f74a8c3d5102d9e904
        261280aa2d3b48d4711cdbf5ffe4b477e97e0dc31128636b3eac6cf67bbf6d039dad0f3099e3a5459f000d2d2dda1fd02b03e39d8ca81ed1c369d39c9c35147d
        9af4a14e793b5b2fb7bf612fece6e59d2082fa58681a38fe52173a3431f20c8e213a4f8a5bfcbd3988d40c25274424703fda55fa4a1ae3e11b7361f5591bc4da
        496481f7de99a0d1e183ce46de104a5b056462bf1de1d90602f8c9bb90712af3bde6f24fe161c501de2b2f813994b2633d28bcd4555dd1eb8492417c08599081
        f33fba05b8b794590318e408b6403b89afc48bcd8ced7037ab5f9c4f517c76a2b131857cf20dcfd95ccab9c91370bd568e3e58487cf795f91a8910674aa8f8b3
        ac5fb41500438752e2482586b57f92803121b2e840171883599e1c9f4fbdb1322482c10ce192f0161d32761ca7145299849099692ec6e30835dda4aa795eb611
        907e6c45c19305370e9a664b8f2dda413269c444333fe85df3468b2ec41b27bd8e4dd069637659986fbc9c98facdf805d26dba0bc5d43a7d392a14636c816d93
        8649a118336d242cd8828ad62e78d4a32458c71cefeccc95197d95e92f592c9a2fcf6f1a491b8d6f9939a480ef7d7bf57aa4c0ce8199663f60cf8ea1e6734a78
        5847b4a70507c0c57d4bb98d031c279cfcf8fe7b0bb794473b36db8c9ee49a4899ad5b50bf140bd5858eabee19d291a6b6d096c8d430ed0027030309076b31ae
        2d94e33ba88b298e80fa96295f91e1bdcf8457d10153186a8e4f00102208cd1012d6c03fe69cb6062e6c144f31b67ee9f63e90dc510d220db4960dd6e7c5535c
        b1668de82c74fd539ab67abff0c88768707ff807db0ecca6d47b06dff575d607ab3db4ca7ab5a183a99de2028a7ceb3f9937f720c8aaa0edb044a4296454381f
        deee5248fbb439e1634b4cf629f86497c953715cb2e33b9bda8e07660041df353a7b3c0b65d31a822734aa37796bda415b8c20b2d4258ab7dcef7e11a8694beb
        d27eccd3035cb8ba7521afbaefb37c72e8517839c0995af4a9d08fa62774a30837bdd4c57b43551a7131780fad8beaed1f653f77800ef32a69603c637b6d5547
        1aff77884b22388fd58d5786972add7e55b16eb603ae4c366c2789ea50003f2e1885b6884a7609a81a6ac78837e96a55a7180c7148ffd907c96765b38b0790da
        74382b45511049cc8d8d92c8a8ba31c969111e7262b3c88b84ac7ab25b1151cba86404502109fdbf586258ac315cac73df6d7d673ca52f55daaaa62c599a2acc
        0e6e522b93ece42b105529bc717ce132b42cd2af13c3b569329dba1c4876c621b86d105fba38dba389a3516d1e6f75d78ac8da344b2b99960daa79b9abc159c2
        763abe94e6984f5f1722f1e2674c486c359d932b6c343c726d10d6314e6ece0e7fbf7b3fa34271d43b717cc4a9b92511cafa00828f3f8b0aa6c641a3a282397a
        059d0c107ad5cbebf76f5132b55802da0e063fc2e293e9ff0d55524ab3a7ed4e02d95e620b3bd4806571e6ff981998a4aab139cbf30fb5f311ede7bc4dc0f44e
        c03e44fecbca838fd68a8e28906de08996d1ab1273b770ea10eaae0283969130fb5c161717b6b7ae794d2dbab62eb9f502af86af7da6225d43862cb1712ba77b
        35d67f6b0a41882c8ce6af41f0ddae0ff21ca8ba3447227db323fa96ce4469688c4f26d80157ba38724ed07944d27180509ad9db69e32268130aa853d9cc05e1
        28ac7b57be8efab3e9855598ff5b1140e04b375f9cc7005657f6c923a0eee0bf6abc4eaf1db0a032fb917dc2cd1c7f95c34408fbe1a686da110ba8b5ccb9cc05
        f38dcc77338e32158ec68eb97703cc1816db035e1eade3ae8eae27f3e288edf0f02e8eced5de37eb425428d3f1feaea05c5e2abc48592a9a501ef67a837da374
        52da60d060456cfd621011e1b5bd876145f1ee0f610f847b867ec27a210ba70e72849946014b985214b307b358fec67b0fd616339a4cab9d21cea5807ec8e4bc
        f9e4a12120d554b77c23abb73554a131717f2a95133e050467c7e922d68112bc43a63a4d21f39f9b35a921ab3db68cc8268568d08b26a2c4e739fe9043e43a12
        8f0caf244014e8654972b4d6908b6fae78ad1731ec0d6da564caf78bfc5db9520339599355c85c4f696199f358d9e8f18fe2811a9bddd0fa46212ecd4e829c93
        07a77d6bf72ec7c1185ee378e4132e75cc4001ab76e2e761b7b0a75451ed8ca07215507e2e3dd9d418f7a64bdeed787c9366ccddf766b21c6df99814fcfca79a
        29054216e98979a59f4956b3793a4e93c5e4f2c5d5dbc489d468b677043dba2263d1b2a54b3528d8c940cf663032bd93b8ad8d0e93052d1110da9a74dce440f6
        ebaf2190a7569b4135fa9862541d5221e2a0fb43ac2f4589cf45e46ffaea741be6389fbef8290c04a972a0751339156005b01b9d2066cab2cce0a179dc4188a7
        af8316656c9826d21c04ffd79d4d6168babdcb03f94c1278558dc205cfb29b1098cafd9d72bc4c89b98a78cf4d00eeac79249cd7ba3af357923c9e0482ad2041
        b8e6fe4ece01111327c689eaf096f5a9cb9991fa39482b94dacac9ddc323b12d91f3ecf0cd0f483ec78a5c4666c929d278531edcc165550e9a02a81896f499ea
        a8ba12b85730a509b8870a91c225e6622b3eeec9f08a3606b949808f603de2f5ec070b59ca25f5fa706070de1909dc32afbb1914764d2f70a20ca8380216550b
        7613ce509e56f6b82d78985c70474bf3ac9522caccb537b664899b6d690ac476b44b09f1939526e1e09e74f0159c2e1961fedeb1a2cfdf54275c84691b6f01a1
        ecc371c5c127231d2c817702ba88e51d8fbe0656b5bc485a751b1893622493329da2d18fe8fa00e6ba8a5836a3fbd2c4de48d423de687ac47749f0357c17c98d
        98d25ea8d2fa08966454a8ceb06a466c31f65420992ab9527b00bbc07eb789da6eb56e204f92f19def7504b4c6d8361ce921874373472bd19b25437df3217fb4
        15167f9cf4736469c976ff6a33bab4b697260ba06abb8436367109b21d0aa3f57a510817c196bbb1c2f3dfb02e4b6ff5e6cbe3baaccb38a3f9668d2d0753917e
        207153cd6fa34f4f356aa8d2f80a4696219338ec3072a58ec10c7183ea3f8bef95e75da8ed1bd523ae2fbdd5e9fc39409e7438b3cd4f71673cb091b98a1320f3
        a769ddf5b60566fe3071584ca1c4668c7460c38eeeba93bb09547fb7d47d9231b3c349fa31790ce038885355f716ca2f06ecab580d3b495563cd34713d0082b7
        0068071e9820f683742e097458a50994d8e9ce337cd5f28705aa2f014c40edb5beb45fedc10996da6dbab4ff0d6b234080918e3329296e18d77cc55ae62a0656
        d1c353cdfbba8ee8f71398f803608917e15597853d554ea7121e177fdf1d641f084048b65caed653f80c6c1ee8e099085dd1b90a6e6d4e3007483d533c797585
        791d841274041d40d611b609627e57fb110a8ac5678673b08b0c9e9ca760931e716927a02b647ec9eb620d86084e110aba531c8d8863dfee0601ac6c0e572a6a
        bf81dbb8a5785a6b1cb737649e9378948d08af0ddced3ef4b141ed31e788ec52d5a74f5cf8a6e4513fc94b10370c4ff6355f9074ad374d049a41ea7042672e89
        914e950d5affb2f80f3d8657d77e08a5af2dac2a3cfbc2243882bbef226c26e91b7eb98bf22acb80613240248cc40454d78a47c9666e29ca1ad4f32e04ed6a2e
        3de61a20075220e8325607e03d59121dd052fb1ff792b2fd40d31f83c0edc4c78ab8fd62361be2fc962f946ed775a5ff0c090949995b267498dbec758757e99f
        06725b169855df78589196b4b23de81dc3bb2234537ef9c7262cd712018cb1ecbb2666311fae5d82a244c1f2cf7a1e82d7e9acd3034e2207056d5b9e7b88e44b
        1ab7eefe316651275cedad1bcc24f65ff215ce79afce0a2190f9e6d6d29cb7596eb899fe71e5489324e31e52234187d9315066f642494de28dd6fa942954516b
        f2057745f947a9354bf9d10c498a6cd344edf6d13688953eca77d4cc2c033f4b4765887139e14f11d360d7b8e9f5c03ca6ca392e8de72819ef3f32489c9e0c85
        e6423c2c2feca4950bc7a310b455f6e78da0575426009fc1ca880eb509efb1467edcb3fd6df14f1fae9a85a7d3a22b8c143466009f4f192dd0c51450094749b9
        5fd6f7fc3476619665d70a83da38a28f26cb08bc12f1cee249637e734c04f5c3e1c53db72cc4c7ce40d93a320e3be26c3c2cd1226aa0cf7a07c42d4e4a1d122b
        339b3f89e2f4511988bf2c8bb3187c19292041c8e1b22bd1f1ff73480e4de7ecba23964d764c379c2787262bab2ce02be7b884ce4199157594843bb2ddc6e9dc
        2ed860b86f6b5c727b2576b9f21f98156db060de554e6d9ffeeac0d113556eb5066f9ca7d4e11783ef332cfa70890f7b7e2658b3879944d64cd4d1c8e2c730bb
        b0245292536a8ba53b73ac201089c1f9d4678f74b9234c2312ffb2a82d0f03b766c5be869a6d9dc82972add6fd63a3c80bac722a3e62527fdf9448d413149700
        5ad2a07c28ffd6beaf2eadd4b0337ecf29b96bb6fe2dddae52c87f736d47ff5a37e0915b6123a3df47e4ddb9a65b068d60aa79799496c6db0db621f379ac3a6d
        3b4a8781f2b2e7e35d60c10e6b317adf905091c0c0f4ce9a6afed0fd0b44cd6c4bcc22dd8e39e84fa25eaa51a8f9fcccd3ebaa3d906436a1027e5bc6338f9791
        2e922f46c7693ae57de18cec31adf0f472cfe1dee789311c6c4e1cd7a3eaebdee0d3f95a56230829ff73029f5cba0cd25c2f53e8a450a0feb78226f200fcda43
        4d2bf4a4cb9f33287c7af154283b4299b338b79d2c9b59b31c654b43e94fed50efbcff60344b2d25cde01ef28638b3cb28340d8f11533a3f0095ddf716c37fad
        2727bb8c7e6f40116064dac0e28cd38c69b16af97ef2465b227db5e0a6af16161c442605ce8e59d59d06f99b4d3afffbe03f4817e772e4db8b90e2738d226400
        3986c664329d3f5e3696ff751fe32f14c9ac5a0f41c32d169fa456c2f162f7e605a66eabb9481ef4adb378f0b9a8f7b335a541667b871b17ba52377e533f8af8
        81e5e604b2f5f859c07367d4f538550e3e71fa2e438ee1b9575aefa7ae4ce681b762ed98d130463957f684bc88eaf33678ff3769bd35f469ba11bb2d61b46ae1
        c31a6428a2dc284de7b4b72777bb387981d71e5950197bcd6943f523288294c55378b9e59e722b5d61acb1e1e3a3a0687f494ea2cbc8d8003966225a5eb12f06
        0b13eb99
        """

    /// pgp_pub_encrypt_bytea(16378 bytes of pattern, key, 'cipher-algo=aes256, compress-algo=0')
    static let streamedAES256 = """
        c1c0cc030bb11c16c1852cb8010bfd139f1c7d7b92ecba374488b31523438b71ad448b638eb7bafa7b1d29024ee77e3c25e71385824b6ad5c48286b49854417b
        3fa718367f2006bc09ca47fe512f70eb60ce83e008ef7c8931da85b1254a955fa0db4ec7a4ad9db2e82170fa4950d8c72360612f1fb48c064316b4ac80b6c955
        7d2bd7b3f3e7911f25c7823a995f25757c196ea6ad8ff539cee1d1bb135de77d1e9eb2ba47b444387a9c138cbb21b1f4eb5577a8aec21297f5427335f55d07e5
        a69820c187a50f85d60603551ac50e80a903cdac2e24ec2c49267292786d8be569288384f957e163727a2d86fc31ca4f25859a32a35d1221a2feb3f80a88a580
        36908febc2cbfffca86ffb2936c9d3cbe10cd49770b8ae72a9eec093d8e9f84c6f33114f7e7d7d622df8ea38e4bd2739875813700a59f39fe21cc1dcbb35a691
        ebfafd338152a83ca1cd55fe9da551c79e42895a8a70520d9683a434975fa57b529450308b1306710cba9b0c6bc9c0aeae7a30a131e6bf9d8903e2e1a6a56ea0
        076de50c98238913d9f28d7ac1134cd2ee0140f45f0323c16ab6bcb44ab18bf47da348c1177da15545996faeaa7f0202d02cee104408b10f1976e1cd6cee3cbb
        05de7bcb1e9e7b00a891a14c89edc7283d89fc1def6cd48565d69818761164f6dd6cbf44d3026ce3a3b02c35f79795eea0868544ae9049d6661197d25eece3f6
        b656af25e9dd22b8d41048d71b2aeb801785f397576783900056f8c4f3db6704393f69d3465bd73d25185daa107d5eebd37ec596da90d30dcf9b3c43e1d212ec
        27caccc3d6073a65bc3a312d758e851d4df192d0ec94c4eec684161b7d9a32c96198a3cc2200f5da91c6cc7833f8f9ef7a4285d3de11f90fbbd5365dec15dc4e
        7d612edff0f1a023230596e9124f3fc83b2d91ea7beb208989ae120cfaffd68eefc7dcb538fe99ea21150ae39a30898bc25d8cfb9d1e128d6def1ec235d4342c
        411a49b42b4ea6b8f50aa3a8883b47a52c8dda3a24b545d519d287fb203123fb8ec3f86af3fccf58158a0d31a558725c8264f4ee485e416735fbb4bed52d4d51
        1b6396631a19465af199a90ae6b1fc0d48fa7bc51904b570a1d8a663f95a60208101cb705926efc62b6e9c2800af2dd4acc6ccc2390947c77cb8c7e1207f4a9b
        b6b28ad93d064cab219863d993bc973b0198163bc837436e40b4118534e9c545aeea8151701ab25155402b85af5701c567d0442e45e6a4c88372a634c476dfa2
        89b8bb76034d06e239cdf7c9aea969aefa60e9387053889710d7d13f44e115fa0384a8bd37c33b839f4b6272abe1b711ef1c171ddf384c973c9fa697b12ce072
        5e80cca6e305b35fd20f6b0eae5e5e130b54712d758d4615772a2e659e8a939a73912f07045a7dd1331eabe9bbb92eda177101a45dec88e57b70e6a3fd039e90
        8980b61b766e317d62ede0b9c5fb2bf0540e39243fd7f48ce4b44215811236f5f4701be92f3fa61e6e4c8888a45511d06d3ce8c41c2ec62f4cccd95d200c34a8
        46bdf4cdb7635518399b5911eff6105d6d9b0437726663c33300bad90d3c52e68feb5a8f8dab239b1ae5ac847c584c9bb3424a1fcfb626682368be26ce9d6789
        5c93d9ed3f7c30ba74fad167ba05796bdb58f2aca7d2f0064da96c364be0bae5950c4838e77fc097593a9e5b64b89e3aa0712cb8f1274931ff4b64c8cfde85b5
        4da5f395a05d1b076af75e16617dd2e838f8c47fa930420a5c8f6fb6640806f64b16fcafbe7c49fd2958c55e4267907780cbde2a41a03b914ab2d7d4b6f517ca
        70bfc04c9b7183b145620d92a64b0129ff75b99609eccbf2c86792dc375ee901d7e3a8ef5513b571f789f45572c167cf420589390623a4759a6a6e175b3e9f46
        897a0454c83d59526381c9f6d4f07c7340d2cc8aebb8b0d3aa78631e31a72a310f69d6a4a7ef53f0ecdfe07fb15f9c999ed82adf950691a8ede5d6e69e32b0f5
        04096d1738c67b0f328774894016a6fcfa0260d715b1edf6519c1eb4690877a9ab31d4a966c08c8750282b27a1b08ce3177ed6f1d34d8935e630df78af297b2c
        c0de15d6d8b03b401e3245aab5d8944bbf75fd2f8a868a357b0e830e221a5bae7d4c590ece7a231063d63f24d8d8993b493448b7ef3d227ade0b5763ffd3ea0e
        39b60db80e244db74175cde4b554c649cca88705ba68ef6e9bc7791fc6d60d02447ef41d37cc13d9d2609582471d55ebf8cbc6074f71bf16dd37e15c12724c0c
        d3e7d69ffdc38d035d226b711f048eef8fef697026cae7d148fe2eb0efc57d5e22ae1f3316bc1c53cac40ea81ae18552dc388b6ce6c60bd5ee708afbe072a713
        1e2dcce787b944dc640fffdcb436187de42fe9ac6dc48c45922940ac28eebc740b7ee258b092ca8122a8b7852ca1f407e5736f8643bfe2fa8927edbd3806ff88
        dbcdd27d729a3a1a1aa4292c4843c2c6509fd52200e36287d2a8042ca2c5d34f534d2442d26cbce28d1eb67c597521516d5f5de302bd3adbcf3b29c5043fa8ae
        9a77cfd64f32a8a0d137e305ba2454cd3d3078c8c280c67229ed624fc7a08bd63d50f3182ab0f1341cc95e4184b1b96eed006d7bfa53d41e2b51ec8caed6c510
        48e032ca80fbbecad508db462bb7d1798a4c0d18a1b863b387bce36f40c9321cd338c7efa386f234881f0ce0c3b0a5031b2fdd1e16540639b46380dd7094dd6b
        6e3c506c1eceec5a35db64cc0f4089f6132446c3c52c18e64af1e6f9ff0be6357e827481a11a76ef56f52e0bc5dfc91eaa50bd25be16c3dda694f89b5205481f
        76931f49bcfa4a1ff32ee44efc2859eb487b27eb4444218a17c8f0d31e4cbc164cf774dd4af33b7c6d7bb288dc9cb2a75252ba8f8d9d01b6b25de8bc0826f6fd
        608fd5626f535b4c6a68ce70629dd5cd57f52f1faa9a0394e849d69f5797be515279629f392733aff7ced322d3545989c4f2c4247aee2e1683f7a89c3ddc9ec0
        00319842169f11053b56bd417fe43f3ff67f229b9c2be21a6a736866c82c78a0b1d00c89117fe8f958f2a27d0ac867dc28a1f72c856e62d80607ac46b2f9d6e6
        aac36cced5bd25ca640d922d3a9c46f1f6663f6e55afb4bb8abac2db4f14b1b06213d4d76b747ec911137422eaf41e342a23d57bc0eb2a00d58c99c6229d7bf1
        b056b64579eb6dd9f5ce7c0c42d55f8f8604ad2da0f3d728e53601250354d4db5bd7ab93e1ca4198044ae62ccfd0c380aebbbf478521064c0b5177465bc8109b
        0b338db22d01558bf8bf44238102a0b7a1e76376ec573cfe8ae8832377a1ac56df1276b4277ca38487f7e11a5fd4d231924be805d7aaf936507e5bba1eda25ab
        4461c0b585ebccda163b7ff26af4044ca89627b6da02b402ac4edbfd92b63263c8a66e654748f5ddd19002425c7633b5c526baf881b5f058cc53f0554697c015
        a2706d055a05ca7aa36dfeed485591734a095a715ba65c90e81a590ac586a67ec44bd57eba01d6cc318487c04913d552b84f9f8ea7e29a063fa4cfe874b4e9f5
        2f8ff7aa5820f07d6d70a6797737bf38df2254e8a1a96f60ce30e7311fb9d16cb359b5f4ee37e939a13d0b0a89fe07e7af9420af54a5abe8ee78239ff6ecf982
        5902b79038c52968c5a8509232db1ac86bcb1fe816cb0dfda9781bfee93e20be6b61192fe2b52abb16c915259254f22687ff297ac4c21bcabb616b3d80071c3b
        96284440e109b9f84193aac61cfee64d01f433b66a26737e8ed9616a4aac8f628fe6839667a0bea938224e06831a7d4f4d3af4c5483af71e5066337552c60622
        5331a49099b68c48623abe5a5a3e19693089206faa8a01f7f182a0f151782f8a58c50d1c146110e62c8bcafd2ba1d7795545dae192d31671f9421a2441612cfa
        89ef3db7f9af17a46bc09de58d3b94594d925a0d23c892c12c08eff08f13d7a58b2b604a1f4bd2d1bf77df3cc59a71a36948074ca9e8161571d158e400f04f7c
        6c3762f77288aeba90023484602c309087d979cbc2f65519af0d7ce5d8f4d0a95f922a5e1cda19f0ce4a924ca7194e0fb6161894287c82c19917f2a6569c52b8
        bf90ef786e4bcfcccee0d25c7eeb80d5f20e4497324ba59f56f6df2592e423e02f7726e9503e06631bba95adc085458a85c10bf579cc939ae23cecab6e7bcd59
        916b6494a1e79553bbb15bdd40e57db9268f70dfb4baf805a1ede059982b4f27e59a9dd8e768816124f03cd7a81d82df17a16b3119fa654a05827db9f7f77e13
        d74d18c1d627c9e0c1e2386d3eaeb492d0df09b1aecfb577de1f6074d005baa3d8b066f4864030f1b82cb7c72c6593c356324ad91e55d2739e1d75eb44af3cdb
        088cfec8ed80665968c06e41dd83da6a6bf890a9618b49b65928fa8c6e40604436bbb0c90f441c527dc67f17fa78cb93fcecc3b0c41396827c07f48d5d266f3e
        e7ad0dc30129ea6acb61576bc2a31e69500de297e6876cd17a295cf91262bd5a9e79fc18e87b4605a828289f05c5f91a3431f2cdc95d67b88fba8a134202f31c
        9fdb6420dc0997b18099756d477382b9ec3289c0197e5df5f69e6a025caca6a5471113b5aabc280d23d05049cd63fefaa9f6436990f86e1f4b4a427478ae8dd0
        52d4b26eb8c5a7783a370ec693d3840bd6fc546bb6e04726e3425d34411a766d5347df862f2ba59b4aec446023ac136f10816ec80034ff8ff8a8aafe0d6ba75b
        bbdcbd5125a54bff0a8bddab0572e48a0384b5e7f10f16cea0dee1c3b3dfb0526b6bfcd8ed983093b7c69d12b830b82daf15622759e3c9130720449ef36769a6
        7180b00af8dd6728b53ae475bb69065cc402ea08cc68b101775b17ae2f60b3ed727a0da4d7b1bc1719840d13533ee129260c5154000b6fa73e1c5e66f614d4c3
        551de4aad97e6c01a4c91f05463a5ea155d3a07c718007543cc7816d9e8816bfb7296bd6d268e5c10bb5285f08c631eaeb3c746b6e3b89807bc605f6ba8fdc0e
        e7d6b838efabeea4a86d9e1866da1417a4ad79d597111ca899eb123cc9a4f084577bb172ec09e1bbf7d8b9f89368a9ece814826b1be155a394bb8a85cf47d4eb
        532d8ffd9c4f02b05a92dbe9826b87cd3a80403f1f0b122e9500e482c439386f2916fa45b66e4a06975cb4feffba0097841795688774d7c717fa6787dd7913d1
        13c6350ac540b87aefd3dda80456dcff2c1a11ca7a2ad815f45c87012f31f8fb810d5a9d5261c42c5fdf9d3ef9fa4d9f273a3bbe2b6aeb61a4fe6e8b22c1d781
        16284103226ec309a60442cc66ad2377d0cc969447a2e9107b7fcf9fafa08d81896b3d4c690861dfab619d4ca38877e118c31960a11ddd28673e90b80c22282c
        e49d32b98928dd5926957cbe2614403650d636cc1ab08ffc337d1f90bceb9ecf961f03699acf79441e9a879078e4d23bd1372ef7498880f9958907ee9ed22d5a
        ab5597970b422e4ff9c7c09327fc5ffd74e4a2fa3cfe4398ee4d0796f00e64eba0e2de249a42a7409949fa36a1a733306d95f7442df5b6d55908a708b70fa143
        79857fb99d62947ebee537b3897bcf27012c34f04559a6fb64fd2f7dd08b55423f02586c5ba2650d7247b4f09bdbd0a19341324cf5f9e75893b5d7e964caf8df
        e50465ddaaf9815c8eb28f26f1e7f998235a26096d662d07f66067aeef6db76bafd25cab0074353c15cf9a307b30be488cabe0bfe1f8606228a9f9c5b620bf63
        c5f35634cd81dc62b913adc18fd0b23560dc787c020106c54bc648462c6fbe531c13617e5db9bab5a5837a92d7ca65c4991b31bee7f332e8c86309e74a89901a
        77e036ae8ee6c5c9ab0b4df871546ea070ee0b1deb1951f05ee9df4c817539c70e0a4283eeb1b7b37203d4dd16f44142ee551354e9a6a13a2fc9c1739584eacb
        05869ea8e062d14f39180eb95dc37901f2dc2ae106399a6fe0719741e411a2e8d8354431e787c6381bdb07827e791129a23819b00620e1df6fd62d2c8da5a53b
        e5464f64e4409fcf185bee73ce7e738853d29907b2af00548bcd8811dd23a14493d6bb0c169881bbebf5d4d46240acac0300e2ac46b098725ddf5567f635b5da
        c7104b88083e62dc3bd6b25b23ec12b591e6810aa4e043fc327add0c531953c1ae3d8af5792397515d914ae4b83afd25f56929953798e440adfa0385a4ba3990
        67f65891d05ffe620ede956c5bd1f16751b107d8f49a71d6042340f1df26294f20d0ea37b0b7a5104d6dacabc8ff9d8c97e1317a5c3fe3e77a8a2df1cd4c4156
        f60e178b8680d908a2c250c4131d731198ef4c9128e6663bacbbf28946f30d1750abb2e26e1c3e4db469863435b9008c0a9bbfa81db6b116456c6ff4474cee84
        6ec924a02dbac3e54a02e9a53de04a1c8330e49938035d170119d98703664a38776e0bdfd5871d478678704a9961153de0005612b540e7a4d08de24b1423b683
        253b17fc48f925a48139a65da3627e25613c4a2790e2202f6b4f1b9f39900c10e4b8730680765c87b27c3d53161b1e961fa1bf9e857541b020111a8c1a51bfb3
        c4ab1baa3705166a44ee88708349ac99fcb6a4a5adba89802fb0fdf88257fe3884244295a5c6b748234d6bdc626df5098c770413ccfe0217fb7da0b4a263575d
        3455b13722cfbfbe66b650b06e149fbf56b0266f34299dacdb809c50440676f9aca63c3e7fc5fab5d90dd427bafe102c5c165f191ba72759ff945eb933511859
        fdb6c770cc6619c8cadff8144beae518eb9a05bc49df6a42693a127ed41b994f3bceccebc974360b28f151cee1a47dba29c66dbdac8729f6703f947318ace094
        ec746c381d000fed7822ad6acc9eae9197b81e66f9d10f515b98825d96ce383ddb189fb9adad94cc17ff342150709e952b99bcaa0a17da0aad7b7c4a90ad1f3b
        7f59f43ab0e768fc8b337b87ec7226dab98dc3a274e1df6442c1fab314b204d66ad2f42eab70772cfc431b701a64feefdf2d53ec5175b8b62a44c30f142b6d2b
        6d634ec3889cfd154fa65bd5971f0913dad5b91ec8e47f31b92ceaecf9b92b998a42652d63184cf538189c646bebee44810a6535478798774f7a7124a15663b4
        8427670422e0c770aac299052c5005930d236be5087862351048c248ac3669ab81712327f9bc8fc6725d6df6c0f6bae47c4571e220233747c7bd549799e9c442
        21c747412a53e8f02b3a804b5ce836d5cf40acb833a005301283dc8a2d09a438f92f6249ea3449cc7c9c0404abcdfc46cdc411a4fdb556d3faeb633a0d0f0501
        f4cc5bc07b8d63dcad6adcc6839214e802768565d126a2cd53879d9e80d6c41379a261fc37d5c557ae0f9920f61eda474811e6eae1b08687489819657d511f08
        541d8ef31c815cccc536b9e9ec996bdd249ce4d2ba75c5c3b6192c8cb4a4e86d40e2b1041762f463d0f683ae287651c0dc35fec4ce7303308064d46bde6fa694
        7abee81f5e4359f51d6e693a29917700e1a4a772fbfa1310fe5e68c5b001ed3e8183afad7048e977d431bf21fecacf501a63c02c69b980f6b9ab925f657c0737
        4f88c9bc7710fd86476da91bf54fc556f82bc0080c6fd160aa4883b07de1d755fc507562481994c8527ab9c204c13080d480df3ea283f5d7abafef74fd8353fa
        e0bd819882bd75ec692af838f5257f6987e54928a58b49b2bc281a62e3af49aa5b5b279dbd9b5864e8dd1ef6ec5f8d6336265378d9f6a794a0c00fa797ca7b7b
        084650a7022bc1be102a1860d9ec1956ef238369eca9287151c5a992107b16b72e0f3484d53dd8416d588a32c18bd84d5db43fd30b69ee46115f20730ea0656e
        b06955424efc8ffbd71d28727783c924b31ccec10e13066fc7d561cfa612cb677f378777dca27354175720e3602954e234ef7a573bc54ac1863fa2223f9d89bb
        510b4b958d6c07dc9beadb126d8b226ed18281dcd12041583e6ba61ac1cfa092df7e47b20d899948b1dac558045fb71f620cc58e7a6749debdd6c3f6a7666649
        a55a2cefc082659ce7937a2670b3bba9db2a969fdae149271a1c80b1c3a3fd16e22bb8d1ef26e9eb6bf1e6a39a51feb20f83467b91d65226e97a1e766998f10a
        e4f71ace3be8563464db0ed8dc7dd37965350a335a4ae88a26917e86e3a13b122ba9c3ffd95a110600bb048ce84dfe0be983ed570d11a3837b0728fddd4e89ee
        b2c7e87b8fc01af855987bc9ef23da139c4bc314e920edb03013a67ab40282681a4d05eb169c2baff41f58814e0e4f760b3890c1861c59c0b005c04c78f06c24
        a38c7119293722354a5b80346d0fdc586ec0b9d4e6f750136b7541884fa873549e565e1925cdb8e9d8ff3bdc762e2394b6ef7d2e1363cdfcaa76ed5cd49d19a6
        b8cc192348e69affac232dbb61184c8d1cbb27012821c71f13b8f88c044388fefd6f7c2e13f1e761436615e0e693dfa2d223d4e654efca9058cf8b619a29522e
        ea87853049c9d67dc08ba4133bbb05cdf3bddbfcb7992d9717300d7022cddc4140b87614b8fc107173b50f85221cbdf73ae0c391195dae97a232330c49003770
        a3b16d2d602e0e37e2c0f66399189386bd7d6e5db4b64609edb54ca84d1f72a235ecf611041bea619413ae8624e114175ddfb7f2ac38c34176696198168969de
        8cd45f0e4a173e645f8d851a29d691ee83b74130d47da76739dd1d58ca2522a4ae64aca1e116281425072dffcad3f4391eff8284de4c2ca14f014e9688ab2a66
        56241742b1094c7b90981beec3c0801724cf5e99ac8735498d6f68b43f1f8bf269770a40cb5f43cb29137258ae8278c23ed6bd2b83836381ce1ec4a3ff10033a
        cd973cd1a83e12fd3c8158b43bc2275dca9171762d7bf9c9bb1724e671d05e9c45032bc20ece0cf003d64568e1df9c6aa28260aaf81df898df3d917346459b32
        d2c9b50f3b343499cdc87dbc8078fb78f1ff3accf0c113fb86946f42ea9d404dd53fcc0746a2512912cefed05651e6f430afdaee82cc50f5d70ad356d66105cc
        81a5057c870f129775c5a1801a3de36431f4c6ccdc181c4133e2a4d0b9f77bfbc39873dd8c2ab6609917129e12f5ee6429af7b739177e5b3dd1a5f6133079ab0
        aaf9c1f2459550b81dd24230866c6dc02b0daee2e858a35bcf90d4cff48060e9198f04c21f89c1e33297e5458142ffdf40f6d5f9d42f62abea51ecc822a6b80a
        2dfef832850f2678b638bc178a9de223f61184afc25a889e5a9751222e47518b6c24ea7903b1489578df7510c18547f1fcb1838fe479d0d0a7484ef3f9ba13a7
        4a2990500e54b8a349ee836bc6435285fef3dc36bb3a3684ded8e8ae29a4bccfefcecaf5cbcfdf3f3873ad99d7888934b230d01f4701a829e65737fa62bc4a99
        08c88130ea95afdd223bab370777aa161a5da646a57fb6296b61835dd1224fcffe009a9e3b773110be3ec72c6c95700f627643a9c3b184eb2c55e0c730339ecd
        17e2017bddd43faee78fb7a67d3a0bdd466f70818181defa5284e33167dda704a54d6c0cc5c28ea7812eaab14e40350876cc329f01cad1a6787228abcca230b2
        f531bda6a4f87f57e3a0c90a332ca300808263a3d9b5ea44d9d9d0fc8108c03956b708fe2e24dd800a9a383c6878f3e550d6bccc335092e7beebb4fa8cb2845c
        d619df45e2686e4ce190a260c94319caa5ef3d67587258d1abdbb348a6086ec211e401cc6cfe64b8761e03eb787457069ceb16fd2ecd0d1d6ad2f2d832c9c0d4
        05c2422978c07a01b7ff80d7db496582d1b506121d9456694e14dbaf7eb782e8f336709601a891dae42ca8cc0d743b3125c6985a925c0c5b253f300de6ffdfba
        25980deaf44a989745e8f88bb4a5fe13f85e9ad8911493d5624a871e6a783e40259f901424bbb0b00fc371d5ee446eae16a7ae38e4ca7ee6f9e590627681f99b
        ebeae6348800614a04958d6db884a3427335be5d19414782627fc1f90ce08582daa8fe2acd4ca27066cb38830a4151e6d42c3f2f88868862fb6a5946ce545232
        88964f4a73a7884f0354d00d14659da0fa96edf4d9d8437979dceb4daa54533187c95ea95e1ecc0a8dcf39486546e7f52c6b3d055668c349be6f76a20fa98c65
        868e6ecb2ef29b9564b2210caa968a0b6fa990d16fd6d01f7a40d3efdd8b22a90b77921d3d05795105994943e1e956a2cb0efa993366fd71a54287be18eb2d1a
        7f3cb6c7eca80bddc258322e3be6e1906652d7f4a0213643a248fbe0061913df81b8cbdf7aa02b77713ba8a3704ed55fc85e5a7867b2a3c91e5c5ccf75cfbc8a
        d1620bac80cd5dd2c9fa2cf56e19e9b9a636f21099c9b0993f8f5ebd987804c4b96a6c716972e98c8cbcaead9e9cf97e22f94d18d5fd194ec17ec08e6f29977a
        2ef42a8df8cd4176d683061b12afff8d6601109510cb577e0283429955953d7442611ee48553fcb95d51ac3ac389baa76dc0fd56c0a58f3e4e5fb46f9814bfcb
        005ba838cee6f57b0bd03cc4aa433b1700dbca50333bfe79cbd8a1dbbb5cb5019ed18cee46fda5bd7f2eff803ade2f7d757dc8a3c19cc48a9d215579924923c7
        0567066b67d87e617fe76c35ee143800fcb0a339301db8acf852fee1d3ae69544bcfc0fac7c20fc733690c67b84778b5be0ce86b93f80c8c635651cceb813e94
        8662a88210583febdf9e29f22677dfefd3c0bd2776bc7dc9f040a04b4ff00880e71e9141e4b88b9b898a1eb392279d81173a15e2894d852eb1a28e62f0892902
        b9c12521478d3fa6fb4ddd8502b40c407fd275491c5250ff7d330fc02096f3975cbaa11d19d02b022547058c93044b2a8ddf24b4d30ae4f5221451f83bc4177f
        ec6c880d69290bb145eeab295edfebcf36d5e5be4ee98e72295600ccf0deee1c05c540372dcd8b5dbb0cf9dfbbc49b177e1dc50a7f0ee3389b593b2563d0efb3
        96544e59874b44c92d16362c9cc3ce47529a8ae00c99c31582f1e0a5b48932188c1a78d2d1c1208ac62cba48e9da8168382d46dcb086f7e0f8c0e4ac5f539bed
        2af8f1870e684687f9e7258640cf32dea58900aca872fa28dcf38174f4e27f0fcdc2c80d739d81e5e707e42f3768a036423a22d6fa564838ddbc41950d353633
        517469aa0757c4f2b56cef1dc95895facd507e92d37828b0bdd2f3d1390606232c0e6527647524b446627c447dfa0258c3396ef9d82cb5986efdd33d47026f09
        5ae029205adbe2c4b1537b5444c06eb0f95dc0b4937e243d0e53f012efd218e8d319d0a64a249de235175ad6c061f619a788bafc4c67bcf5df944ca057945583
        211da9957e23dcdea2e5f2c9ab1d3ce1f1fb8fbb6c5f2bbc64e6d8a1780e67e0be989b61a2c0188d230d570c22e75eb98918596653b1f51218c68700fd779313
        66d390cd612b54ccf03b25ee460f13e8cf08fc8f3b0661cb095256f251a6b9d7597cb81b43b6d364baa5ea7c9ed284532c3b2b3ed0c538186789aa9e60e04323
        3550e84fd201dd19c2d28dac4d206bf320585d29a99118dfad72194a8192dcc8648b571a9b78fd07d375f53da2e1c1105a89c6bdb7972c5630a1156b562072ee
        21b9b89b93a28f11df2c1d2a8f96961ef7441f37e0c2fd20c507c22f0b0a2ce55206096b88f92a1a8fad5498459cdc8ef0bfeb25d3c5ca69c2686f7a757751f0
        45bb49fc8229c4c682bc75a5b9f6808d041f0c426ec5fcb34978c6a8166b954b26a5ac733e9a8a0eae968612ebcba6610f3cbdbf96540ba57d123adac1ff9119
        3ec928cfa6cd49ec4e45187746a6f9071d3051b40b516ef42224fe53d68bd9f728a8aa0facfbe47ba5a68b396a7c4d69875796d0e67905d6653d6a54d1c08f0e
        11e90f80f88bd4b31709e064587d4b74ea8ea9cc87cd52e5eeb8aa80ca427ca1f1ae9e947d103ecb4b3d126139d234b5553d213a327ef23890a219439923451f
        9080f84a776f0e9247f6a6fec03cf3b4cdee1e86679963d59ef593019328c5dd3f52d8f9aa3dd625aa0f9a9d52e7362b3d7f9357f5e6d892fba72124d29c3b42
        d15bed53aba2980ad330d1f6c9454e5b5bc975f3135c416f58d018fda968918c7abcbc3709bd6b17fb7faf3e20da412e7ff43b493bb6f49f474e4bcbc93a135e
        f3154de15cc7897d0cead0657114d23e62a7a487339a2b653c7eabb5bb65331d02e3c36675e6f0e881f6802e657f8bce0baef501509aa10cee21aee33446ef7e
        6e8ae5f5b80ebb2321474ba0ee7bf54b6ded30e593a6ef8e429b08befa01bc0fec1338dbb8671dd21b08936f8241c22febe97022a6e34f691af22404d1fb6541
        d2cbb18faf17d86ccad05ec63e6dafc76610cc73c09ed7b56f30185d4ca6f372176ae26978c0aaa2c4982caac5420875878c42321e856f2514a1ca6c44e4a9f9
        dc7945fc36577ab56546dd83cec6076507eb93e84fcb6410f6ec50fca9b117c68d2f16b2b372018ef0cc76784a2b4f6aa14813653224c548d1f94c982d9ab9dd
        e88d6fc5dd5909cfd25fbdc60cf878d48dcad0d6a048040dec77746a93fd98153f5bec68842960a3e416adfc5563019f15c7197cf6d9809c69f0b1beff40a6df
        e6db76016ac9e94f2786e8d5e2a721bd4a36fd7a6b8aa3210b041845706776c48225fd0cf7028d5d4bb6fc81bf599045ffeba282bbfdb2ef38d7adf0da18b525
        73477b253de469c1984a3b8f9be927947a61fd2e981973d68941d7ada63b2470d587203467c5f84b0909496210259dc0b2e43038eaea2f13f549d5ad3b30058e
        37460dc713bc0b8ef9bdacab71c1ff1c4ca55bf7d9dce1d9b3594d8d4d60a8ac45a4282ece23b7925534163cfd4d911c17a4da64678321a99c9904bb86384487
        4758e8ea3e8378598eed1049410d60e7a315e3399ddffd6d06aa4c2f2902b6af05999d205dc32995e4476f9cf12c85779353d194d4f299bc6984ab1d57390c9c
        4f3f444389a96543fc837654bb4971fb47f859a440f764914e3acce6a6013ede9d793bb8571af8d4496e30987ac5746d6dca80890ce9259ad1144d309c2ceba7
        73e474338134659271fab0e023f4abcaea1e63c558720c8f66f22737907ede82c297c4a22cc4abf09b34e9c1606f0c27384289f4f7da6bde48c4c7428e375c62
        85645c119df709e53400098d6252bacafce69cb369debf32599d5a4f319670fdf44fb18814c57db6dde6f71b445e43d08886da76c4d5e9ddaf443e255be75ce7
        cb7fb3c15a39d05ae7d3727eee0d0ca5737fdabaa9f9e5edab33434e07094fafb6d33b6220024d3b4f40e0d521f2273f93e9b35613f6e97852bd75a9dd24bf23
        ff8a1e6092050df22d5c5bb6005e27724cdc6cfaecea2ce3711b8ef8f38c18c1e32f63dd9ce3d9115b6ede9b93ad3fc7fcf1d8aeaa3188d44a1063b39fb0448c
        e944440d74ed52516346884317295f0e44728b2d60204d6cc5b52dbee4dfc359c9bd8d4ea7a23c59dfe79044a753ee047574c50e61ddd975250882f47653a9f3
        7001060c38af6aaead851528cfee1c677f7d4a0980e4c0e7514d05a4e7155c2d7ed176162e2a7ca95383fbb020e88696c1594caa10defd30b1795b65e58c7370
        91bbafea5b2f6f144923d657ed491bde76cc561eacc3db29119f8fdaf3f69eb17e95e7ca0518900a92f2a1ea13fffe11b24e0ad160606bd5fe08c788824c6cdd
        1d4e4e6ef6baf6a56eaca6f6905bea977a32f2a2e9b5331b268ae8baba38cd798cf158fec5b7e0270d5a929b80c8ce0ff174ae2aa1bbaadb744f8759675ead57
        7d7b89183535fdedac6994285907f42817152a30c23728c004faa95cf81e7d63c86db78805d310ee28a1bbcf23a164713b217fe5fcc9965f1b9e0bf4005e0b5c
        537a13a6f8a21c9a176b20fd448af5badf80eff73ae5569fbd47d2db48fa857b360a4af50f4bddece9c9862987fc974dc69b34008f99bb3e104d0ce2fe265beb
        48c36f3d76a84492c1cc7415bff53926f9411e772ddeb208c5c561ff19e51aa2dffe6258fdb63236e816f4fe62236bc21b2c2b0dad52eafb1b6b6f013c8ec3bb
        21e1bd01bbd63a98e9cb999c58efb4677e7cf89624d5393d85e92113ddc345a54c8288c71a521d47c72fd0b4871cda743742cec1f1f921606931fb64b6a67cb4
        f033a468bc7f0e00536a81ad504fb92b812281c8e434998022938793422a6498f07814b057d845e640ed6243f648dc6aa19b0bbdda5130d4e412ae554aa8af94
        775c3f3593c8ef475039734c87fad98b71a838c51aa192097c248dc1dc4c996b364dbe96829e5717b6423130c3c823132dd6129fb7fc00b9fbe78c7a787b486c
        de8ab869e3bc81dc3a353a49118360a4c894957cf3040ba9f280bf0334efe038ae9310462e89ad0edf0b1b78de56c7ad80d9675308f99319dcece37da5369d4f
        d0295c7d37e5cbbbb26bb9335c3139542bba547c3a2b3a4ac01dc01056cad1c4d22df08fe4cc3762890b7aef508fff5eee2cfc4d7a4a74d860a42180fdcc83ca
        870059e8607aaa25cd2fec0828508f5a8b29f67d4181cd66c7d2f3614589da664ceb8ad41a9da5f23a5f8c2d9c9c1be3e12c74015d5e3bbe624d4a9facaf5f18
        2dca8ff1c82dd17fc4a8b987bfbcdfe08e42f35c5aa4f1231463670d3305806f2a35446c5c28bd7211df4cf53246bc7be0d0edad8da68608b89b1fea8b357c4a
        b55afefc0bc16b0144c8ce489588604496d01baa80cbf2af488570e537183eb564bf60fd353317e26c967689960e0af58c9c3e8794e9fe464b9e0a4f678d1cfc
        4ca55e60767f2818bd7590c04296f67f4cc22bba5e7cfc4560f555466e1c2fbd1868aa39ae5050ffd97910b4c60981c4bf9ed96a7424a134ffa6e35f40fe8161
        a5ace369360cde2b07055a31955abc33f2af710e47f89e8d6da1f9949f9343f33e9de11269e87020668bf4782ba71dcd30253f6299cd71ed14c9f7f5f3fe35e2
        fa6421a346eba6284d943e4a791fabc1cdedb80482eb45c0a050c2cf566ad379a48267adfd8c22b528e03d65a28028bc56eab3e4deb885b2ef39f037d8b79f0b
        e2ec1dd6568fa8a1478389a9abd6070c0b133c43a2356d83093715e385d436855f4b8e77835cd4c0d66664b55bd46f45c8408aa0044e7d2885fe3f466fba9267
        7042b208e69e1fdffa4567fea86f89730aaf56565e2bd5ffffb10864041bc83a6d4e6e1fa3e5b4b56b5ee3f2787ad64224f69d381945d0f88939714b2f450a75
        5ee22b130d8c8dd8efec9429338ebaf4c4007f34ea19c31f630d385d652758480bde48b85751ea9a7429f7dadb5dae2dd613973c090b65b36a487a67d72265ba
        cd4a42edd10b817f8207811debb42b7b1c6ff61b8f200b76a9cb1ec9598e3582580687d7875661e210e25e75113a879f129828a7de7498c9e15b0b4b9689d8ba
        62b81b5d89c9f500a711593bce616f039e200294840a17ab4f40712ef9fcef3d555b0646203edad5d983216e2af82468d174360c23cee1d9d259c5acc4a39ed1
        0b7ef30e1f182d1d3f1c3cc2a4b558c2f569a662766f8762dcca902acb495ec87249889fdf824409c6c1f6858a21ca7db4511710e4edf6101083ebe2d85c4c41
        3cbb0f412331139ce9745d78a499e3e14a3e7f447e0a0e9e068b9145dc4979e16ede43f2a576bfc0f4b3abed68923d63b76cc16ff29686f0776e1efa2dc7e48f
        b124f447f76f2b133302ed0c429c656681c4ae5e77f804ec2e1159e468d2ce4b765daa9a40d707df66554523a5d21fbe52addf73e1323e507ad9e3725ebe673b
        3e84df9813b386ed73ab6f68c9501ec8e6a23bfa2ee334c2b13bddef69f6a68eb3c59aaf4fc76f02aea370f81114ad1206640dfc5e751bc5fc60f5d8673a84c6
        c5c903933555062c83dde2ac83962137cb43fe3df29f3705cb7ecf0ffcd402203fc457716cdcfd4867137e5055a0268d919d8cb137edfd9048b2fb8eef481bcf
        20d2dad6071cdd89539b972161f2257cb169a761662f6d48a183eda81aab331175b3fca8a256ebb6d9dc9c331c6796b407fdb406a4dc60f63c20c57bfa8ff1b5
        df0aba12a582419dceceecc5815605e942436fceb7486c01ef1f8cb04c43986a23958d4df262d0e30e038769816244f8427a49c16aa219623b58a0919c007bb9
        938d1f9ba5d3a052d60667b0b56d8f4775257e0d00cdf880615f256fe2ba8117fb81c97ccc204c1804b466e49bfd11a4d0c496d9508ffe61f8d2592444541176
        4d81cec62e231baf7d51825d15ab1a749eed17e15498dcfc2bac3f82bb1a62cde6b2182ea41ccc7f4bd82e04381d1907beff5cd698175ecd32dccd333953f37f
        c7b608b36eab3eec0915609c0ed39977657a9b21128a9802252db6a444d80a2e9287e30e87e8cbe818b2df3c1c5337abfbffbeb444bdaf836e8d58ad9c6def41
        cac2ba8b1ed921d7d36dad2964632d0864d6a2a65ce397c8c6cecaf47d17dc6bf3b0a9a4e1eab1f11079018639801f358b75099bae38f0741e6315bccee08751
        613f9224055bdc342fccc9fadaed40574af93f740a1d7b7d5f9fceac371d5e2367a6540ebe1d1c8b459cb4975242249714604bc3299bbc606094d383840d7a44
        65f492b765044c32fecb3ff880ee8df804ac2dfb4f9e9cf354a8e6745ca73c56b03f8d7de6f7514faeba460f2b9e2b9c46efcc5667e0b29767f4b189583d96fb
        1422dba61339a3995b531b957ef12b4f41be0784fa6fc9cfac464b64e15f96a5e35d6352d039bc4330d78cd460594d97cb36ef4115544238727bf350bb199377
        b6b08a8e4f70614ee3dbeba736b0586666b4dad9592334b261e25f712356041bbd73c581353a3022082bd5edcc0cd63fbde70d892680a56a71999a2d643d7a20
        427ae79d70a4b04c497634fc49d264e36f7547aafa4736251266910c7c171fd5c9c590d73e436ceac460cae31b093ad4a24e7cd28c22a1c0bebdf9534c1823d9
        8436f57700943fcf86d78da38950398f458cc5f82c2b13efc8c0134a112e68aebed575fb9cddbff85ef2e57cb44e18d10658e3649da06a4966789485ecb7aa66
        1741d8692ec1aead66c352d3ecf2f0479129fd6cc354e728fed89d1fa1bb99925d4bf5befdc5aed0bd38465495e84f0b8daa8be0701fda28cf758e9beae05f04
        25069750a46ad21757a9bb186f662c45b9378db112bfa3374bc67db9e5ab15cbfdb32aacd111abf4a85f8db16a9a9b16e07c63d0d79180625042f9a97841ab86
        de6d6e35be7d4b5c75c660ae30106749bbef202c48f4de6af39772d3ac8df67433da89b6c7a9a50b87ae9421262f72153d931a813361965ee6af999f0e53babb
        6c453fe5c78ac8415d04fa9ef5af3dbdf966c88b90300279a6e7fd9bb74347d353b12a98bec4f4dc32fa9fb467f95b4fdd566c9db3f053c2b44a84927cd6789d
        d40aa999b7dca30b8ffae280588e9f371b6a2de0d4aeb7aca31cfbc0a06a7eb9dfb08b1851d9537ecf8a21232ccde4ee414fc8bccb8f6fa197aa4fdd2ffe5e3e
        2f37b43a4dde8536f0f3bffdfd8f7a7fb742f7186c093dca9fff4d4873640537d610a84f5626c0ca241b29fde929183ac17a2db696bda8d6c9b9aa9931a7610e
        b9f6fb42e34f7c4705ce8ff7297298f843768aa9464c42d08e6e34cdc53f8dfc207725619bff50f49a834fd455dea4763bd88a46aad7b5d4536f79d13bb9bf36
        224cda03d6ff0f159653817163b0e84f7cd2f661f35e1a16e088dd0c7d0d7d535f90547ed7a4072e51730613073328f08c8987653e71f771d9091b301f8b8970
        b8ee1a50227016f366588a2d8b712b25bb47bd3c5eafc76adecac1183eea96dbf416da20563de6ca3670c36f6dd6216e7f6219330b0efaef838c7e084c014979
        7f37ce696bdb8cb92a549de6dc359258ca0047da62d0c9ae97cbf6e02f0c4cc327f4cc1254e1aec868983d206d0ed3d72b5885c48f722ebefd38d51dcd2f8fc1
        f11cdcd282b5bba316a392b9bdcba233968877ee9a790e45dbeaa4529c8d0bee939e86309416207ca3205dbabc188de15e50ab2a55329f56b61b3249bca8af13
        154b03e6c6d6d5d86e1c5681fd96868708f9583fed99aabfc923a3b2ced727a54ef242afd323f99dd205917a73fbbcf7b98d676d5c516ae7cc1642c7d3e14e57
        ba745faa8f3e59dc994d08eec60edfcb6ac071ab602bbb17d202da08e6ada745f7475b8289e328f2f3e1082ddb6c35e19a61719928857f0b4debd82504b0bafd
        8bf6568a0ee6e09008588dfafef4e7e45580b82d852414c622d058e4a1cafd27625d1d5e3bfd58571f823150df050330da56b8d0e630411871acff3e5335a3cc
        ad4f428b084dee318b7292aa3d13365ef17f3b9e829c1b2161807270d1589dfad5841a8d75a141e01f76f675298528c2c84e1655d100b427cef7ca584e248a07
        dab8ed2978d89450d3d9afc48aff8c25212a3f8197f225fb9028e981974458e3413d2a2fc533af27ea9db46030971cd3a8374df07ecf2e095f6e2370905412ea
        826d091c4b18ab196be8e47ed4aa7862ffaa3fc74c58807cd51bb4dcfab4da537158bf5f507a3f86626677cf5d53b0722f63c033c70cee8e2cd85b3a3aa549cd
        b7bdd23a9d318a7d609f6dcab21ec768bda0e7f995820d7c3c44edef6fcc2ef9937997f1a7396d0562b3b563a14a28d944ac0a7fd0e8c5c1a6cdd463104c8111
        e0cc6c79bb6442ccc33082d5cfd8c2c07055b3fcb5ec71a2b465b7f1dba09d398c02382330215d2dceb6faefc3a85e316c57b4ee7b6d07146a1f779adedbddab
        76da0461eb660d9278e76be2d0cb31acd3a8ab57fd939a0871a0dea155a6f9d7e9eacc911a700321a15e75846025a1d63f8b2d84a9531797fb7c4f425a8778e9
        cc1271a9eab74471949dc1741e7077cba7bec716c656154ae825c165caad419e101983af59cb09c37fcf4b172e272eba712d4e688a673c8a365f75540a2c9ff1
        dba132fdbf5faef7e6710beecb4e1d25a80e8448307247cd68e4102f046d66e7dc11a32b54f744bd564b920fc7459c5c174f7d84fea06ad14a9a8721108ec118
        e57873c947c69d6e2abbee2e4b8f60841c8aaf0e8a7fff4118aaa4f5a243c347d1f5ebcf74779cea0a601b0105e738ebf90841da4d2d5bc3d82e9e0f64cd6743
        756098dbce5b4767212b6011b17de3a0ad16c551a990cfca9e9974301108f119efd551ae1f4b020e1187a1d7bbd419d39d6ee58b0fa2d00d70f402cdbe730723
        bfaadb16e517331b674c5112781c991e41c4ada95c29d23cb8b404e580e7be1b9683e73f300a3e388a87cd1e41b6d5d415dc0d604bc2afa4cdab582efa1ba47d
        07d0da16f69aa554cf543d6078171140af982bbc595806fb89eab9bbfd3190b1e8a9ee7b8b7a7106654318b0de483be57f257ddf2c66dffd564beb77f1d6918c
        71ef194f7279c0e829ce536e90518b70707b3c9d28f6be341f7d65135f86cb55ee6fbd0d197eeabed3c8385e468554ff3fae971caaef2cd86f2d1b3840ace45c
        8275fb932a8829e868a1dc77449400c819639d82c0a89e954080f18003e228488ed1612ba7c9e5a9efc5decf99ad90afb495d3904228eb9c7383e38a13864aff
        cc06dba28fc9630679577daa2ac1f647fc33466931bfde97baea63ef0ac28444cc7a6c497af207a4d4786939b77fb67522bd54e67889d7918c03346114bee5b2
        bb73f041a5285c2643fb78cee7b9a83c77dc0250a68515b61f57152bf601444bee193da0b9fa1ad1ab335d7d404d336ea7f11f62ddfc41255d144c788d706a75
        f714e1d7f3bb422caf76b7cfc37dd3802b52bc0992845211d11282b724b9c1de123d895f5423e7dfb799065721443b5bf09349697251f69ff39e6fcc494766e2
        ede9740904c03ea0aa7d5459bfa4f5ca06c00bcb0884d94239d9384562eab1f9ea96b069720cb062ecd55cea0dec6349d453f58da6662fcfbd79a5b9e3121258
        ce165d1f40699c9ded39bd2713575e4058906bc4320392bcd42ca079499843525c28f86bd967851699c46702bf2c8bb1da8308cb8cc15240f1b4244fb6b3a5ce
        f515817379b19b50c9bc4c9049d8527d028556f6820c88d93f608c7f3920b9e799774a687b0d0cdb905bc547b59345736dcdc3a58ffc1fef2ed53ef31afbfe81
        e18373640206feed273eee7efdf6d7bd89bdc9d43f3f1332e7d8403dc60212a42d92d9ff0578491d0c5c5fce8b2bc9c70de26318a7b4afc7a7c4a39df341c479
        fdf4b3ee0ea5b9ec2f4d3ae78e57768eebf42879b7fcbb1ebfbfecf74c59674c37a45fdf0abdfd9e6e7248cde9c02dd69c367d5142e8a67a98f4106373bf5133
        f608938f7598aad25c0f5ab11696b2e6a654d6dd6f576d87f8e3858d4c1d992ce844fc8cc7364a89f53a4ef6ec021c067a65009ef0dd4bb5e5b2f4c604e44eb5
        c536e7c99bbeee4abdab40a73f30b2f2924aa2f87199fc627056b414c309fe720704f40ecac8ca8a31f67538ab5ecccecaaa9e7ebe94bbbfde9a35b593cd93ff
        b0fbea5d6c19bb102cb20cf98607feb1871d79c70a2b104e7ed6b1ae25a39681a7eb3aeb2d11ab026d8c93d34f16e65d723d92599949e1b240d852754eb04d41
        a43404d7248699a2d2493890bcb051193cca10a792750ff0d1686d74925b3d7f355877f23ad48f4ffb745c528ada4fbf52fa6d9d5273fb5b81114e8b1d7e4656
        beccfb6a180b3fea7e64f1eb9a49b6180fdcb1e1f71b6c7356df83e647e35b743010787b010db2c5f8956f313d35379e059e6d9963f22fe8b67aaf44810a5979
        f5d48b8c2b512a3a014e4e49badf394aa1831b3ab386484c2b4bd923c0906952b57caed30b5b1c43ff49763e5f6bf83aec460165246e621287b1f73b4185a9b4
        04f451213423e141425e23199c79abfee8c2e1241db4e89239f612a65df7568b6ee3fb121a65ec65ad049f281f39957a2f5e0628c616793b5087d92105206d7c
        0c038088e075df266ad599662697eacd589160a6f514722512abd7ef83739f2e4199078d221e9132522b994cbf44994750a7d24e4ddb18e35a59481013825c50
        b00494d93fc328402acb5d6a91850e6b15cb27d7e9d47f35fcb922829d5c2c083b5883f7adcf674d17f8b0658fb3946a4bcad4337534cad2d7ca3e6dd7179ea1
        ecfdce31c820d3dd8e6911d04e7683e09fe2639ac8ab6a49f3e6b2c1399f673c218e246cd0bebabbcdcadbdde16433db387c5f2271f9776d58abe3909d971c2d
        34d01dadc7249b720bbe4ec9dc4fa23e840a5411648e9813b37775e8e179484ac7dcc57c4d7a2be0f612f5fe00216aa6eeea45b41e25110497b78643237f0eaa
        ed83377800247e197c495b31118da06a0ddd2d3a5ce429517cb4d0e371698ac4d343ec7709691b5a6e78df348e1074c7d37342ce030e73ac3b72a1fdf87df7cf
        f99416508374c7a53defaa6931d606ca9ae3387a2838337547fc689712add88df74690be148e3a1da586bd4bcc1a8478b54a99fb2a84ca0d192168c867368698
        ede868864100df89015061d242970af1694feadf587bd8397bf148ca23146bf51bc35b75f10ed77ff2879cc7aa635a1d6f9c1757b22fa1f7da97402f17cac2a4
        7aeddde9db3c82d55752dec13626a6631dad42262d26cac8f34c0e0b9a2096d1e7248b0895d3e38c3eb61a233149ab124afd58cf0837c7d430de582b7ef966b1
        14fc42bee23795c3fd025c6bdba229bc23472fb9f7085b14f552b2285e50e2798902af4b4cb3880bd846a1bf88ef5ac99f79cddb00fced45128c1d06771012b6
        bb8ee4c70285476e6391eb9fdf582c3146fe92ae8487f0f2b1fa29e6e5a657ac3a6c41d534fd1c3d2ed600fc3459152427b88096a671165899ad5f2268037acb
        30c9543ad47aef789a3eadc7164967bb4f0515357992952919c6731d4bef0d513fdcd62b5194618d936143e2d596b2522d3149e279720ff8c410eadd5cbc3f64
        d74eefce8ca2f7c0c267d68c5a771c64232684f44a5d54ea5b48112a7237b3d1e2bcbdecd114329dffa8b160ea855cc531a7f8d7bafea3d2976c2d5043987beb
        dc50221020a95c78ca4ff6ef7cedfbd2a442bdb062042564ad23dfba18b21510818f91ad17a8c22883c7f21d61e5ca923f1543b87481bb642f3cd4c90cd20c8b
        de222a8fc4c1d524b73b2072a415cf876375bb9b1e7ff94fcc2b6045d6f627e01b35bb90a9bd6c8d32db4745991f5b6aa8d94173433a03ce3482d68ac8843eb9
        6554f498ee7ce447d1c557873a73cdcac2c6b26302f870bad10321e0d54cb74121bcd0581cdb1361942d8cfab7644275516e9ecae081f3a0ac9844c173b9bad8
        455c1a82e1f0f2752200762c32f27da177a5765d2d65987a607b5ae78086024af083e823f90891a0d3192ba37e18076ca7b615a7446ddc747df4aa8d1566f9cb
        c90497d08bf07669cdf6d4c3acabe9abd8a0d43b561757c2a6dd51583c3637aa859f20cf8b0e30e824c012b3333a31c2f0cd24c45d6fd69b94aeb64dc17cd430
        7e2c011edffd94b55c9a710a42a910569e5f7bbf2344c9110568da53e4f2dea2b3fc4d103a4d4e159bd86591b5a52c5d7eddcc1f9c7c2e45bd4a362ed6a83b2b
        1a0f159c45083a91fca43066fe5a621a4b9443684976f816b1b97e020d0f8305d4201796b7ba1782d26d0bb4b7ba1e7801b5c0678e95df48b9928c519f5ff60f
        618ede8990fa0bca0c5e24ac8cf63370ad78a0c775563f716392e2f9c21043392c6883c69c21dc629fcb6f1ab06cb7cf73d943a572d4294cc91b9b2949a649aa
        8dd0075bb535e2105bf5147119f89abe3fa89eb61d2a8447689912fc7a4138b6bfdeaa713cd7cfb67d3791f2f35eb6d0307e0f246fe282ea44010d3f09e25a69
        be7cf9c98192687bf9b5554c130dd1aedb441a927e952c23812e71f733ed45e9d1ff5af8b0d03cdb60b76004677c68eb43d6dc45ff602817b802f55632dfb843
        24d5043574595eea5a01246c1fcd9bb2510733f3d6c374e6fad22892617bdd4f8bdf3e094f2d6b87e4e88d2e2afa97a7d897954320e3a66acce147a107e7219d
        5cb07d3b9d6a0bed96d07eb9b51316b93f6719775faee037927eadded618f3cbaf9ccecd06a2a783bc395b525bfda6a3a2f9157838820931e7c7efc28d153070
        687c13d289c930b68d1e1e70981064129c6c2cc08e9a9b46f844f01eb476cdcf97d7f3e032a8f694f87fcf34618d299a10f3fe768a5fee0d75bc17b24aeb909e
        971da86178a8e88ee7f35723e94d3167e3f0a5923f89d1661ea52dde6ce9f0db5cf787dbf6b800f5a3c0b66116a3b9dfab050412b3f63375686146bf6ca00f8c
        f5d3174bc450043494032fe81ae623089a8390d475d5fee0e2292c09baf1624359a1b24f33edefad7f730b99946692c35dcd959680fd2c882f6ecb4ddf18e882
        fb4b8fc33eebbb3ff6eb63f019525aefb78958f07c04400aa6965e398ee07be7c2c3feaebdf37ced55f3c4c2c94f5e2063c449af5d6db9e992c2cb3b01129eb7
        6ada914bc738fbac7a819d3af9a6382ccecd6a58f38e0112d15ca2358e9280067e659e6a0ead20fff2ea77e3f47353de11503097746f7a527fec2689a0719a42
        6e07efcbe8313fa52e8a8ee05d12d4e60697299d1d99c148ad54079742b12f971b4806a30418edc2a211dbe318a2b23ce60bba9c741f843adfa2cf7d1aa46d72
        80416387015346cd8c8c33ce8d374d55a2ef4de5b75a218f8fac9aaadd2e959a8c221f1587c9961c9d574d37c357866bf3bfb7d33c4f86a33fd7546cf0f92565
        3f4289cb0e8cdf72105bd73e66c907440ea24f12c953db2d3fd050de4f695538bacc0e4cd22b7f0199c3cbf8f6a27dfe7bac764367b54d094462746a5d783cfe
        b05a81786b56907a616c2179200dd234a42c78efa67c485d478699683242cbff6e117825e691871ab9257de612f103780be248b10bb52f0c74bac3d817b0
        """

    /// pgp_pub_encrypt_bytea(typicalCredential, key, 'cipher-algo=aes256, compress-algo=1')
    static let compressedAES256 = """
        c1c0cc030bb11c16c1852cb8010bff49c56d2725cbdf56daa55acb58adea4f29b119c60442ba80406e6ca627f28d660ca7aed7098e556bae9e6f5c6431241a6d
        58b72add99c17b6ca7931727b2c35ef1bf434771be2f88b8ac119c1132a2585b8107222c5e4b8ebde8750629ab1d61d91e4abd1c2f54aa6b3d0e674671914c0d
        0b006ff66a78b2b4872426146763aee6ffd82faa4883ddb516d99ce1f4a8e1914bdcac17dc2c8b06dcd53c0b89e2bd2e18113ffb707fe6eea41464ffc9f80f06
        069118d64996645202e8901fa4d912d2bfaa995c0428271deff9d0ed2d8666775e8e02f0b629105ef91d0ac2becde1653af58a1986f15e59f4ad8bdc66ec3110
        b87a9e03376eddaa04ee1c1fa27162ef6d026d54a2c56740d407c5b82f97748b8ff5c45450bf87cfb706908321212eff97d1929b28679b31f9e6d2c63c29d837
        a5d89af1771babbc0f933a5403031549bf119736b38fe98e7dc647190ba4e69a72b4ab920b34781018978a36cf2825270812b11bc781884457e8e7ac972776a2
        4309d96b5c5ea866ed804d968a44cdd2c01401be5aacb5af08ed76d95a72ee2b7422907278e9d7e20ca80a87540e325b4b85a77ff24b63279ce5cbc81008fe19
        d28b75cbc588e47399a5db7c8cce2ff414f60332f4136ee141d948ddbd6a26041e818158421f621701d831af9063936fe0a42b269fe86df90b46c2d136f3c9d3
        1c5721ae53b9060b752260d888a0a110939536915164c64f604a8f35c0b1e858db0061743221c4c614ed6733389536f770bcd5a7721ec74d834f735bf3aa70d1
        690f5ab7690128a1d80cd5099a239e4cf1915c2d7c01e590a33f5bc67d38a794878ce4da06aa
        """

    /// pgp_pub_encrypt_bytea(typicalCredential, other key, 'cipher-algo=aes256, compress-algo=0')
    static let otherKeyAES256 = """
        c1c0cc03500ae31ba52a084b010bfc0c88d9fad397d878e61442bec6e8010d2a8dca87f7eeb8dc6524a976c94217029168c13fb06458ed1f93f1b8e5c1a8468b
        b13773142ca4273f723190638525d92f21102172ec4e951ce890fc747855b48f84a10daec2dfd16d43facd5fd4c846098834b9890ef340f93699b05ab9efde2a
        18c4a6ba4c5ef2dbad897cb083d4e84ffca4bb5e9db0acaf99188b056c6c363306f3601ed07ba8c182e90e5a09f83275bd62f044ea02339b6af807a5f7daf0ed
        636d21b14fe948ddca7b3e994beda8131ebbf04ba9a958e5818291aee7c876b91784e0cae3fa1a36c14df3551b753d744fa31257330ffb7b3c231dd93c9c6dd4
        d24a4d8fe6a278ecd9dc6dabc21e975ee0cb39ce8a5cbff671d56e3305eea99f326d64093da9c7eed3a6e48111d38095ec77b26f69a04a0dfa7dddd237263bdd
        7ee1fb36ac6659c704fc8cfc81faa615d4a7c445cc82b5717184f1aa21f0c2fd103a95cbf0e57b8dd295cdbf29bf140b135a6d60e96733fab8dba8ca38579c35
        26b21e6f364749b4468107b5d72cc2d2c0230147506b49ed87f368f440441aad61e8524e33f528f12ea35d6ac5f21c0e6891822cb9e80eac9f49c51a52a1488f
        0356ad0029a0fc315b7a6cd85b4034fe204194cef15b589f0bc472572aa6225f095a23097c1d8e0a12e7ad482193136e4c8bbee27e2b74d124b4e119bc04169f
        00db70067dca448e404c293a8f55d087f0d3bf7eabb6f471311dc41a3d096223b07b7f2461af450abf48379b5bc046c0d9c681876e07c5cc92baed1f4ece3fd0
        652d9f2e2fe6f6aa09c4b42b60366e677d1718f87e7ece9c27f0563154cdc8e49a5de753fc928fa6c38e068cd93fc2dbcc435f4079
        """
}
