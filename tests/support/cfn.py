"""A small evaluator of the CloudFormation intrinsic functions template.yaml uses, for given parameter values.

It resolves what CloudFormation resolves before a resource is created (Ref to a parameter or pseudo parameter,
Fn::Sub, Fn::If and the conditions, Fn::Select, Fn::Split, Fn::Join) and leaves what only exists once the stack
does as readable placeholders: ``Ref`` to a resource is ``<Logical>``, ``Fn::GetAtt`` is ``<Logical.Attribute>``.
``AWS::NoValue`` drops the property or list item, as CloudFormation does. An intrinsic it does not know fails the
test instead of passing through unresolved.
"""

from __future__ import annotations

import re
from typing import Any

ACCOUNT = "123456789012"  # moto's account, so an ARN resolved here compares with one moto reports
REGION = "us-east-1"
PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "agent-memory",
}
_NO_VALUE = object()
_SUB_VARIABLE = re.compile(r"\$\{([^}!]+)\}")


class Stack:
    """The template as CloudFormation would evaluate it for ``overrides`` (other parameters take their default)."""

    def __init__(self, template: dict[str, Any], overrides: dict[str, str] | None = None) -> None:
        self.template = template
        self.parameters = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()}
        unknown = set(overrides or {}) - set(self.parameters)
        assert not unknown, f"not parameters of the template: {unknown}"
        self.parameters.update(overrides or {})
        self._conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        """The value of one of the template's Conditions."""
        if name not in self._conditions:
            self._conditions[name] = bool(self.resolve(self.template["Conditions"][name]))
        return self._conditions[name]

    def resource(self, logical_id: str) -> dict[str, Any]:
        """A resource's properties, resolved (every resource of this template is unconditional)."""
        resource = self.template["Resources"][logical_id]
        assert "Condition" not in resource, f"{logical_id} is conditional"
        resolved: dict[str, Any] = self.resolve(resource.get("Properties", {}))
        return resolved

    def resolve(self, value: Any) -> Any:
        """``value`` with every intrinsic function evaluated."""
        result = self._resolve(value)
        return None if result is _NO_VALUE else result

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [r for r in (self._resolve(v) for v in value) if r is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref":
                return self._ref(argument)
            if key in {"Condition", "Fn::Condition"}:  # the YAML loader reads the short form !Condition as the latter
                return self.condition(argument)
            if key.startswith("Fn::"):
                return self._function(key, argument)
        return {k: r for k, r in ((k, self._resolve(v)) for k, v in value.items()) if r is not _NO_VALUE}

    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.parameters:
            return self.parameters[name]
        assert name in self.template["Resources"], f"Ref to unknown {name}"
        return f"<{name}>"

    def _function(self, name: str, argument: Any) -> Any:
        if name == "Fn::If":
            condition, when_true, when_false = argument
            return self._resolve(when_true if self.condition(condition) else when_false)
        if name == "Fn::GetAtt":
            logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
            assert logical_id in self.template["Resources"], f"GetAtt of unknown {logical_id}"
            return f"<{logical_id}.{attribute}>"
        if name == "Fn::Sub":
            return self._sub(argument)
        arguments = self._resolve(argument)
        if name == "Fn::Equals":
            left, right = arguments
            return str(left) == str(right)
        if name == "Fn::Not":
            (inner,) = arguments
            return not inner
        if name == "Fn::And":
            return all(arguments)
        if name == "Fn::Or":
            return any(arguments)
        if name == "Fn::Select":
            index, items = arguments
            return items[int(index)]
        if name == "Fn::Split":
            separator, text = arguments
            return str(text).split(separator)
        if name == "Fn::Join":
            separator, items = arguments
            return separator.join(str(i) for i in items)
        raise AssertionError(f"the test's resolver does not know {name}")

    def _sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        variables = self._resolve(variables)

        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name:  # ${Logical.Attribute}
                return str(self._function("Fn::GetAtt", name))
            return str(self._ref(name))

        # ${!Literal} is CloudFormation's escape for a literal ${Literal} (an IAM policy variable, say)
        return _SUB_VARIABLE.sub(value, text).replace("${!", "${")
