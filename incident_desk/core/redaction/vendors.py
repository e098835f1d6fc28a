"""Token shapes vendors give their secrets, recognised wherever they appear (a prefix, then enough random text).

Facts about formats come from the lists secret scanners keep (gitleaks, trufflehog); the patterns are our own.
Case-sensitive: they run on the original line. Each names the lower-cased literal it cannot appear without.
"""

from __future__ import annotations

from incident_desk.core.linear import Span
from incident_desk.core.redaction.shapes import MASK, Rule, rule, vendor


def _mixed(line: bytes, spans: list[Span]) -> bytes | None:
    """Mask a token that holds a digit and an upper-case letter; refuse an identifier (``test_each_format``)."""
    token = line[spans[0][0] : spans[0][1]]
    if token.lower() == token or token.translate(None, b"0123456789") == token:
        return None
    return MASK


def _with_digit(line: bytes, spans: list[Span]) -> bytes | None:
    """Mask a token that holds a digit; refuse one of words alone (``sandbox_settings_...``)."""
    token = line[spans[0][0] : spans[0][1]]
    return None if token.translate(None, b"0123456789") == token else MASK


VENDOR_RULES: tuple[Rule, ...] = (
    vendor("sk-", pattern=r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}"),
    vendor("k_live_", "k_test_", "k_prod_", "whsec_", pattern=r"\b(?:[sr]k_(?:live|test|prod)|whsec)_[A-Za-z0-9]{8,}"),
    vendor("gh", pattern=r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
    vendor("glpat-", "gldt-", "glrt-", pattern=r"\bgl(?:pat|dt|rt)-[A-Za-z0-9_-]{20,}"),
    vendor("xox", "xapp-", pattern=r"\bxox(?:[abposr]|e\.xox[bp])-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}"),
    vendor("akia", "asia", pattern=r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    vendor("aiza", pattern=r"\bAIza[0-9A-Za-z_-]{35}"),
    vendor("gocspx-", pattern=r"\bGOCSPX-[A-Za-z0-9_-]{20,}"),
    vendor("ya29.", "1//0", pattern=r"\bya29\.[A-Za-z0-9_-]{20,}|\b1//0[A-Za-z0-9_-]{20,}"),
    vendor("eyj", pattern=r"\beyJ[A-Za-z0-9_-]{10,}(?:\.[A-Za-z0-9_-]*){0,2}"),
    vendor("npm_", pattern=r"\bnpm_[A-Za-z0-9]{30,}"),
    vendor("pypi-", pattern=r"\bpypi-[A-Za-z0-9_-]{40,}"),
    vendor("sg.", pattern=r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    vendor("key-", pattern=r"\bkey-[0-9a-f]{32}\b"),
    vendor("_v1_", pattern=r"\bdo[por]_v1_[0-9a-f]{64}"),
    vendor("shp", pattern=r"\bshp(?:at|ss|ca|pa)_[0-9a-fA-F]{32}"),
    vendor("sq0", pattern=r"\bsq0(?:atp|csp)-[A-Za-z0-9_-]{22,}"),
    vendor("hv", pattern=r"\bhv[sbr]\.[A-Za-z0-9_-]{20,}"),
    vendor("atlasv1", pattern=r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{60,}"),
    vendor("nrak-", pattern=r"\bNRAK-[A-Z0-9]{27}"),
    vendor("hf_", pattern=r"\bhf_[A-Za-z0-9]{30,}"),
    vendor("dckr_", pattern=r"\bdckr_pat_[A-Za-z0-9_-]{20,}"),
    vendor("glsa_", "glc_", pattern=r"\bgl(?:sa|c)_[A-Za-z0-9_=+/-]{30,}"),
    vendor("lin_api_", pattern=r"\blin_api_[A-Za-z0-9]{30,}"),
    vendor("sntry", pattern=r"\bsntry[su]_[A-Za-z0-9_=+/-]{30,}"),
    vendor("dapi", pattern=r"\bdapi[0-9a-f]{32}"),
    vendor("atatt", pattern=r"\bATATT[A-Za-z0-9_=-]{30,}"),
    vendor("gsk_", pattern=r"\bgsk_[A-Za-z0-9]{30,}"),
    vendor("r8_", pattern=r"\br8_[A-Za-z0-9]{30,}"),
    vendor("pmak-", pattern=r"\bPMAK-[0-9a-f]{24}-[0-9a-f]{34}"),
    vendor("dp.", pattern=r"\bdp\.(?:st|pt|ct|sa)\.[A-Za-z0-9_.-]{20,}"),
    vendor("age-secret-key-", pattern=r"\bAGE-SECRET-KEY-1[0-9A-Z]{50,}"),
    vendor("apa91b", pattern=r"\b[A-Za-z0-9_-]{11}:APA91b[A-Za-z0-9_-]{100,}"),
    vendor("sk", pattern=r"\bSK[0-9a-f]{32}\b", by_shape=True),
    vendor("-us", pattern=r"\b[0-9a-f]{32}-us\d{1,2}\b", by_shape=True),
    vendor("ntn_", "secret_", pattern=r"\bntn_[A-Za-z0-9]{40,}|\bsecret_[A-Za-z0-9]{43}\b"),
    vendor("figd_", pattern=r"\bfigd_[A-Za-z0-9_-]{40,}"),
    vendor("pat", pattern=r"\bpat[A-Za-z0-9]{14}\.[a-f0-9]{64}", by_shape=True),
    vendor("q~", pattern=r"[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"),
    vendor(
        "glptt-",
        "gloas-",
        "glcbt-",
        "glimt-",
        "glft-",
        "glsoat-",
        "glagent-",
        pattern=r"\bgl(?:ptt|oas|cbt|imt|ft|soat|agent)-[A-Za-z0-9_-]{20,}",
    ),
    vendor("eaa", pattern=r"\bEAA[A-Za-z0-9_-]{50,}", by_shape=True),
    vendor("pplx-", pattern=r"\bpplx-[A-Za-z0-9]{40,}"),
    vendor("xai-", pattern=r"\bxai-[A-Za-z0-9]{70,}"),
    vendor("pul-", pattern=r"\bpul-[a-f0-9]{40}"),
    vendor("sbp_", pattern=r"\bsbp_[a-f0-9]{40}"),
    vendor("pscale_", pattern=r"\bpscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}"),
    vendor("rubygems_", pattern=r"\brubygems_[a-f0-9]{48}"),
    vendor("cfpat-", pattern=r"\bCFPAT-[A-Za-z0-9_-]{43}"),
    vendor("xkeysib-", "xsmtpsib-", pattern=r"\bx(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    vendor("ltai", pattern=r"\bLTAI[A-Za-z0-9]{12,24}"),
    vendor("akcp", pattern=r"\bAKCp[A-Za-z0-9]{60,}"),
    vendor("pcsk_", pattern=r"\bpcsk_[A-Za-z0-9_]{40,}"),
    vendor("lsv2_", pattern=r"\blsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"),
    vendor("shippo_", pattern=r"\bshippo_(?:live|test)_[a-f0-9]{40}"),
    # Past the run of A its first other character starts the token: a long run of A alone (padding) is no token.
    vendor("aaaaaaaaaaaaaaaaaaaaa", pattern=r"\bA{21}A*[B-Za-z0-9%][A-Za-z0-9%]{29,}"),
    vendor("sk.eyj", pattern=r"\bsk\.eyJ[A-Za-z0-9_.-]{40,}"),
    vendor("dt0c01.", pattern=r"\bdt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    vendor("hrku-", pattern=r"\bHRKU-[A-Za-z0-9_-]{40,}"),
    vendor("fo1_", "fm2_", pattern=r"\bf(?:o1|m2)_[A-Za-z0-9_=+/-]{40,}"),
    vendor("rdme_", pattern=r"\brdme_[a-z0-9]{70}"),
    vendor("oy2", pattern=r"\boy2[a-z0-9]{43}", by_shape=True),
    vendor("tfp_", pattern=r"\btfp_[A-Za-z0-9_.=-]{50,}"),
    vendor("ezak", pattern=r"\bEZ[AT]K[A-Za-z0-9]{54}"),
    vendor("pnu_", pattern=r"\bpnu_[A-Za-z0-9]{36}"),
    vendor("api_org_", pattern=r"\bapi_org_[A-Za-z0-9]{30,}"),
    vendor("atbb", pattern=r"\bATBB[A-Za-z0-9_=.-]{32,}"),
    # CI and code-quality vendors: CircleCI, Buildkite, SonarQube and SonarCloud, Octopus Deploy, Harness, Netlify,
    # JFrog reference tokens, Tailscale keys.
    vendor("ccipat_", pattern=r"\bCCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}"),
    vendor("bkua_", pattern=r"\bbkua_[a-z0-9]{40}"),
    vendor("squ_", "sqp_", "sqa_", "sqco_", pattern=r"\bsq[upa]_[a-f0-9]{40}|\bsqco_[A-Za-z0-9]{59}"),
    vendor("api-", pattern=r"\bAPI-[A-Z0-9]{26}\b", by_shape=True),
    vendor("pat.", "sat.", pattern=r"\b(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"),
    vendor("nfp_", pattern=r"\bnfp_[A-Za-z0-9_]{36}"),
    vendor("cmvmdgtu", pattern=r"\bcmVmdGtu[A-Za-z0-9]{56}"),
    vendor("tskey-", pattern=r"\btskey-[a-z]+-[A-Za-z0-9_]+-[A-Za-z0-9_]+"),
    # Payment gateways: Braintree access and tokenization keys, Adyen API and client keys (and Mollie's, of the
    # same shape), Stripe client secrets, Flutterwave secret keys.
    vendor("access_token$", pattern=r"\baccess_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32}"),
    rule(
        ("production_", "sandbox_"), r"\b(?:production|sandbox)_[a-z0-9]{8}_[a-z0-9]{16}\b", _with_digit, folded=False
    ),
    vendor("aqe", pattern=r"\bAQE[a-z0-9]{5,}\.[A-Za-z0-9_=-]{50,80}"),
    rule(("live_", "test_"), r"\b(?:live|test)_[A-Za-z0-9]{30,40}\b", _mixed, folded=False),
    vendor("_secret_", pattern=r"\b(?:pi|seti)_[A-Za-z0-9]{24}_secret_[A-Za-z0-9]{25}"),
    vendor("flwseck", pattern=r"\bFLWSECK(?:_TEST)?-[a-fA-F0-9]{32}-X"),
)
