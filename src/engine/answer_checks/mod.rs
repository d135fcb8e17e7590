//! The local checks of what the host answers the server's own requests with (elicitation,
//! sampling, roots) before it is sent: the answer must fit the request, or it is refused with an
//! [`AnswerError`](crate::AnswerError) and nothing goes out. They sit above `proto` because
//! they speak in the public error and, with the `schema` feature, the schema validator.

pub(crate) mod elicit;
pub(crate) mod roots;
pub(crate) mod sampling;
