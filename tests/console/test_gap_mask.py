"""gateway/console/gaps/mask: identifiers masked before a question's text is kept, the rest kept
as asked (known answers, then properties over generated numbers inside generated text)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.console.gaps.mask import BANK_CARD, EMAIL, ID_CARD, PHONE, luhn, mask


@pytest.mark.parametrize(("asked", "kept"), [
    ("我的手机13812345678怎么改", f"我的手机{PHONE}怎么改"),
    ("电话 +86 138-1234-5678 打不通", f"电话 {PHONE} 打不通"),
    ("86 19912345678", PHONE),
    ("身份证11010519491231002X丢了", f"身份证{ID_CARD}丢了"),
    ("身份证号110105194912310021", f"身份证号{ID_CARD}"),
    ("发到 li.lei+hr@example.com.cn 吗", f"发到 {EMAIL} 吗"),
    ("卡号4111111111111111", f"卡号{BANK_CARD}"),
    ("卡号 4111 1111 1111 1111 挂失", f"卡号 {BANK_CARD} 挂失"),
    ("卡号4111-1111-1111-1111", f"卡号{BANK_CARD}"),
    ("全角１３８１２３４５６７８", f"全角{PHONE}"),
    ("13812345678 4111111111111111", f"{PHONE} {BANK_CARD}"),
])
def test_known_identifiers_are_masked(asked: str, kept: str) -> None:
    assert mask(asked) == kept


@pytest.mark.parametrize("asked", [
    "年假怎么算",
    "订单4111111111111112的发票",  # 16 digits, not Luhn-valid: an order number, not a card
    "编号138123456789",  # 12 digits: not a mobile number
    "工号12812345678",  # 128: no mainland mobile prefix
    "2024年3月15日报销",
    "邮件地址写在@符号后面",
    "编号1101051949123100211",  # 19 digits, not Luhn-valid: not an ID card nor a card
])
def test_what_is_no_identifier_is_kept_as_asked(asked: str) -> None:
    assert mask(asked) == asked


def test_luhn_known_answers() -> None:
    assert luhn("4111111111111111") and luhn("79927398713")
    assert not luhn("4111111111111112") and not luhn("79927398710")


_TEXT = st.text(st.sampled_from("年假怎么算报销流程的吗？ ，。abcXYZ"), max_size=12)
_DIGIT = st.sampled_from("0123456789")


@st.composite
def _phone(draw: st.DrawFn) -> str:
    return "1" + draw(st.sampled_from("3456789")) + "".join(draw(st.lists(_DIGIT, min_size=9, max_size=9)))


@st.composite
def _card(draw: st.DrawFn) -> str:
    body = "".join(draw(st.lists(_DIGIT, min_size=15, max_size=18)))
    check = next(d for d in "0123456789" if luhn(body + d))
    return body + check


@st.composite
def _id_card(draw: st.DrawFn) -> str:
    return "".join(draw(st.lists(_DIGIT, min_size=17, max_size=17))) + draw(st.sampled_from("0123456789Xx"))


@settings(max_examples=200, deadline=None)
@given(before=_TEXT, after=_TEXT, phone=_phone())
def test_a_mobile_number_anywhere_in_text_is_masked(before: str, after: str, phone: str) -> None:
    kept = mask(f"{before}{phone}{after}")
    assert phone not in kept and PHONE in kept and kept.startswith(before.rstrip("0123456789"))


@settings(max_examples=200, deadline=None)
@given(before=_TEXT, after=_TEXT, card=_card(), sep=st.sampled_from(["", " ", "-"]))
def test_a_luhn_valid_card_anywhere_in_text_is_masked(before: str, after: str, card: str, sep: str) -> None:
    written = sep.join(card[i:i + 4] for i in range(0, len(card), 4)) if sep else card
    kept = mask(f"{before} {written} {after}")
    assert card[-8:] not in kept.replace(" ", "").replace("-", "")
    assert BANK_CARD in kept or ID_CARD in kept  # 18 digits: an ID card's shape is masked first


@settings(max_examples=200, deadline=None)
@given(before=_TEXT, after=_TEXT, number=_id_card())
def test_an_id_card_number_anywhere_in_text_is_masked(before: str, after: str, number: str) -> None:
    kept = mask(f"{before} {number} {after}")
    assert number not in kept and ID_CARD in kept


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_masking_is_idempotent_and_never_raises(text: str) -> None:
    once = mask(text)
    assert mask(once) == once


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Nd",), blacklist_characters="@＠"), max_size=40))
def test_text_without_digits_or_at_sign_is_kept_as_asked(text: str) -> None:
    assert mask(text) == text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_text_around_a_mask_is_kept_exactly(before: str, after: str) -> None:
    """Nothing but the identifier changes: full-width letters or punctuation stay as typed."""
    kept = mask(f"{before}。13812345678。{after}")
    assert kept.startswith(mask(before)) and kept.endswith(mask(after))
