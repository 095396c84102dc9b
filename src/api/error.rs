//! OpenAI's error body, `{"error":{"message","type","param","code"}}`, for every refusal.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// One refusal: HTTP status, OpenAI error type and code, the field it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub code: &'static str,
    pub param: Option<String>,
    pub message: String,
    /// Seconds, sent as `Retry-After` (429, 503).
    pub retry_after: Option<u64>,
    /// Sent as `x-should-retry: false`: the OpenAI SDKs then do not retry by themselves (a
    /// tab that waits for a person will not answer in their few seconds of backoff).
    pub no_retry: bool,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        msg: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            kind,
            code,
            param: None,
            message: msg.into(),
            retry_after: None,
            no_retry: false,
        }
    }

    pub fn param(mut self, p: impl Into<String>) -> ApiError {
        self.param = Some(p.into());
        self
    }

    pub fn retry_after(mut self, secs: u64) -> ApiError {
        self.retry_after = Some(secs.max(1));
        self
    }

    /// Tells SDKs not to retry this refusal by themselves (`x-should-retry: false`).
    pub fn no_retry(mut self) -> ApiError {
        self.no_retry = true;
        self
    }

    /// 400 `invalid_request_error`.
    pub fn invalid(code: &'static str, msg: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", code, msg)
    }

    /// 400 `unsupported_parameter`, naming the field.
    pub fn unsupported(param: &str, why: &str) -> ApiError {
        ApiError::invalid(
            "unsupported_parameter",
            format!("不支持的参数 / unsupported parameter `{param}`: {why}"),
        )
        .param(param)
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "invalid_api_key",
            "令牌错误或缺失 / missing or wrong bearer token (use the hub token as the API key)",
        )
    }

    pub fn forbidden(why: &str) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "permission_error", "forbidden", why)
    }

    /// 404: no such model, now or later (OpenAI's answer for an unknown id).
    pub fn model_not_found(model: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            format!(
                "没有模型 `{model}`：可用 site/SITE、tab/LABEL、flow/NAME、agent/NAME、auto（见 GET \
                 /v1/models） / the model `{model}` does not exist: use site/SITE, tab/LABEL, \
                 flow/NAME, agent/NAME or auto (GET /v1/models lists them)"
            ),
        )
        .param("model")
    }

    /// 503: no tab online serves the model.
    pub fn no_tab(model: &str) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "model_not_available",
            format!("没有在线的标签页提供 `{model}` / no tab online serves `{model}`"),
        )
        .param("model")
    }

    /// 503 `tabs_unavailable`: every tab serving the model waits for a person (a captcha, a
    /// login page). Nothing the client does by retrying at once helps, so SDKs are told not to.
    pub fn tabs_unavailable(model: &str, why: &str) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "tabs_unavailable",
            format!(
                "提供 `{model}` 的标签页都在等人处理（{why}），请在标签页里处理后再试 / every tab \
                 serving `{model}` waits for a person ({why}): solve it in the tab, then retry"
            ),
        )
        .param("model")
        .retry_after(120)
        .no_retry()
    }

    /// The `error` object alone (also the data of a mid-stream error event).
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if self.no_retry {
            resp.headers_mut()
                .insert("x-should-retry", HeaderValue::from_static("false"));
        }
        resp
    }
}

impl From<crate::hub::tasks::TaskError> for ApiError {
    fn from(e: crate::hub::tasks::TaskError) -> ApiError {
        use crate::hub::tasks::TaskError as T;
        let msg = e.to_string();
        match e {
            T::Timeout(_) => ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "server_error",
                "tab_timeout",
                msg,
            ),
            T::TabFailed { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, "server_error", "tab_failed", msg)
            }
            T::TabLost(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "tab_lost",
                msg,
            )
            .retry_after(5),
            T::QueueFull(_) => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "queue_full",
                msg,
            )
            .retry_after(5),
            T::Cancelled => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "cancelled",
                msg,
            ),
        }
    }
}
