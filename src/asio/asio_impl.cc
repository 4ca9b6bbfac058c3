// Boost.Asio and Boost.Beast are compiled once here (separate compilation) so that the two cores of
// a build machine do not recompile their implementation in every translation unit. Asio's TLS
// layer is compiled here too, for the S3 client's https:// connections.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
