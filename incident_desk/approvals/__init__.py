"""Human approval of every act: the flow (in band or out of band), the approval page and who signs in on it."""

# The approval page: a person's browser has no bearer token; the single-use link in the path is the credential.
PAGE_PREFIX = "/approvals/"
