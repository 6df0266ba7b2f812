import Mustache
import RevokerEvidence

/// The compliance pages' templates, parsed once.
struct UITemplates: Sendable {
    let library: MustacheLibrary

    /// Escapes per Unicode scalar (``HTMLEscaping``). Mustache's own HTML escaping looks at whole
    /// characters, so a quote followed by a combining mark would pass through unescaped and
    /// could end an attribute; every template declares this content type instead.
    struct StrictHTML: MustacheContentType {
        func escapeText(_ text: String) -> String { HTMLEscaping.escape(text) }
    }

    static let pages: [(name: String, text: [UInt8])] = [
        ("ui-layout", PackageResources.ui_layout_mustache),
        ("ui-sign-in", PackageResources.ui_sign_in_mustache),
        ("ui-search", PackageResources.ui_search_mustache),
        ("ui-request", PackageResources.ui_request_mustache),
        ("ui-account", PackageResources.ui_account_mustache),
        ("ui-status", PackageResources.ui_status_mustache),
        ("ui-error", PackageResources.ui_error_mustache),
        ("erasure-status", PackageResources.erasure_status_mustache),
    ]

    /// Parsed at first use; a template that does not parse is a defect every page test shows.
    static let shared = Result { try UITemplates() }

    init() throws {
        MustacheContentTypes.register(StrictHTML(), named: "HTMLSTRICT")
        var library = MustacheLibrary()
        for page in Self.pages {
            try library.register(String(decoding: page.text, as: UTF8.self), named: page.name)
        }
        self.library = library
    }

    /// The page `name` rendered with `view`.
    func render(_ view: Any, page name: String) -> String {
        library.render(view, withTemplate: name) ?? ""
    }

    static let stylesheet = PackageResources.ui_css
}
