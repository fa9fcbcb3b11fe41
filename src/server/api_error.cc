#include "server/api_error.h"

namespace ecoserve::server {

nlohmann::json ApiError::to_json() const {
  nlohmann::json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return nlohmann::json{{"error", e}};
}

ApiError bad_request(std::string message, std::string param) {
  ApiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.type = "invalid_request_error";
  e.param = std::move(param);
  return e;
}

ApiError make_error(int status, std::string message, std::string type, std::string code, std::string param) {
  ApiError e;
  e.http_status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  e.param = std::move(param);
  return e;
}

ApiError not_found(std::string message, std::string param, std::string code) {
  ApiError e;
  e.http_status = 404;
  e.message = std::move(message);
  e.type = "invalid_request_error";
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ecoserve::server
