// Boost.Asio and Boost.Beast are compiled once here (separate compilation) so that the two cores of
// a build machine do not recompile their implementation in every translation unit.
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
