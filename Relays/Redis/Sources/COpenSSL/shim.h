// OpenSSL (Debian's libssl-dev, Homebrew's openssl@3): TLS sockets and SHA-256 for the Redis relay.
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

// OpenSSL macros Swift cannot call.
static inline long _relay_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, (char *)name);
}

static inline void _relay_SSL_CTX_set_auto_retry(SSL_CTX *context) {
    SSL_CTX_set_mode(context, SSL_MODE_AUTO_RETRY);
}

static inline void _relay_SSL_CTX_set_min_tls12(SSL_CTX *context) {
    SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
}
