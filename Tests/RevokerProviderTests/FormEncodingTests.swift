import RevokerProvider
import Testing

@Suite("Form encoding")
struct FormEncodingTests {
    @Test func formEncodingRoundTrips() {
        let fields = [("client_id", "com.example.app"), ("code", "c1+/=&?é x"), ("redirect_uri", "https://example.com/cb?a=1&b=2")]
        let encoded = FormEncoding.encode(fields)
        #expect(!encoded.contains(" ") && !encoded.contains("+"))
        let decoded = FormEncoding.decode(encoded)
        #expect(decoded == Dictionary(uniqueKeysWithValues: fields))
        #expect(FormEncoding.decode("a=%zz") == nil)
        #expect(FormEncoding.decode("a=%FF") == nil, "not UTF-8")
        #expect(FormEncoding.encode([("a b", "é~-._*")]) == "a%20b=%C3%A9~-._%2A")
        #expect(FormEncoding.decode("a+b=c+d&flag&e=&a+b=second&%63=%3D") == ["a b": "c d", "flag": "", "e": "", "c": "="])
        #expect(FormEncoding.decode("x=1%2") == nil, "a cut-off escape")
        #expect(FormEncoding.decode("&&") == [:])
    }
}
